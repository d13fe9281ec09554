// File: silo/silo_environment.h
// -----------------------------------------------------------------------------
// What a silo host (silo/silo_host.h) runs in, as opposed to what it is
// configured with (silo/silo_host_options.h): the clock every timer of the
// silo runs on, how it reaches the other silos and is reached by them, and
// the storage and cluster providers its options name. The default is a
// process of its own: the system clock, gRPC over TCP, DefaultProviders().
//
//   SiloHost host(options);                       // the default environment
//
//   FakeClock clock;                              // a test's, or an embedder's
//   SiloEnvironment env;
//   env.clock = &clock;
//   env.in_process = InProcessNetwork::Alone("a");  // nothing listens
//   env.providers.storage["mine"] = [](const SiloHostOptions& o) {...};
//   SiloHost host(options, std::move(env));
//
// Adding a provider is one file (its factory) plus one entry in
// DefaultProviders() (silo/providers.cc), or in a user's own environment.
//
// granary::testing's InProcessCluster builds whole clusters from these.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/grain_id.h"
#include "storage/grain_storage.h"
#include "storage/reminder_table.h"

namespace granary {
class Clock;
}  // namespace granary

namespace granary::directory {
class DirectoryPartition;
}  // namespace granary::directory

namespace granary::silo {

class ClusterProvider;
class ReminderKeeper;
class Runtime;
class Transport;
struct SiloHostOptions;

// Grain state and reminders, as a storage provider makes them.
struct StorageStores {
  std::shared_ptr<storage::GrainStorage> grain_state;
  std::shared_ptr<storage::ReminderTable> reminders;
};

using StorageFactory =
    std::function<absl::StatusOr<StorageStores>(const SiloHostOptions&)>;
using ClusterFactory =
    std::function<absl::StatusOr<std::unique_ptr<ClusterProvider>>(
        const SiloHostOptions&)>;

// Providers by the name `storage` and `cluster` give.
struct Providers {
  absl::flat_hash_map<std::string, StorageFactory> storage;
  absl::flat_hash_map<std::string, ClusterFactory> cluster;
};

// storage: rocksdb, memory, postgres; cluster: local, dev, postgres.
Providers DefaultProviders();

// INVALID_ARGUMENT when the storage or cluster provider `options` names is
// not in `providers` (the message lists those that are).
absl::Status CheckProviderNames(const SiloHostOptions& options,
                                const Providers& providers);

// A silo whose peers are in its own process: no silo endpoint listens on a
// socket. Alone (cluster `local`), it needs nothing more; in a cluster,
// `attach` puts it on the network the others reach it through (a
// LoopbackNetwork: testing/loopback_transport.h) and `transport`
// makes its link to them.
struct InProcessNetwork {
  // A silo alone (no other silo reaches it) whose runtime is called `name`.
  // Its id is an address of the documentation range (RFC 5737), never
  // dialled.
  static InProcessNetwork Alone(std::string name) {
    InProcessNetwork network;
    network.id = "192.0.2.1:11111@1";
    network.name = std::move(name);
    return network;
  }

  // The silo's id, as in the membership table: HOST:PORT (its address),
  // '@', a generation ("10.0.0.1:11111@1"); without '@', generation 0.
  std::string id;
  // The runtime's name (what grains see as SiloName()); empty: the id.
  std::string name;
  // From the start of stage kPeerCalls to its stop: the network delivers
  // calls and directory requests for silo `id` to `silo` and `partition`.
  std::function<void(const std::string& id, const std::string& address,
                     Runtime* silo, directory::DirectoryPartition* partition)>
      attach;
  std::function<void(const std::string& id)> detach;
  // The silo's transport to the others (a cluster provider that is
  // clustered needs it).
  std::function<std::unique_ptr<Transport>(const std::string& id)> transport;
  // When the cluster provider schedules reminders by range (each silo those
  // of its range of the ring): the keeper that hands a grain's reminder
  // requests to the owner of its range, `owner(grain)` being that silo's
  // address (HOST:PORT). Unset: over the silo endpoint (gRPC).
  std::function<std::unique_ptr<ReminderKeeper>(
      std::function<std::string(const GrainId&)> owner)>
      reminders;
};

struct SiloEnvironment {
  // The clock of the runtime's timers, idle collection and reminders, the
  // router's retries and the membership rounds (nullptr: the system clock).
  // Must outlive the host.
  Clock* clock = nullptr;
  // Unset: the silo endpoint listens on the `silo` option over gRPC, and
  // other silos are reached over gRPC (mutual TLS when configured).
  std::optional<InProcessNetwork> in_process;
  Providers providers = DefaultProviders();
};

}  // namespace granary::silo
