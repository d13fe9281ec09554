// File: silo/cluster/cluster_provider.h
// -----------------------------------------------------------------------------
// What a cluster provider gives a silo host (silo/silo_host.h): the
// membership table, whether other silos may join (then the host sets up the
// directory, the router, the transport and the membership lease), and what
// the cluster shares instead of the silo's own stores. A provider is one
// file plus one entry in the registry (silo/providers.h).
//
//   std::unique_ptr<ClusterProvider> cluster = ...;  // from the registry
//   cluster->AddServices(&builder, local_storage);   // before the endpoint
//   storage::MembershipTable* table = cluster->table();
//   cluster->Watch(&silo.internals().timers(),
//                  [&](const v1::MembershipView& v) { agent.OnView(v); });
//   ...
//   cluster->StopWatch();
//
// Threading: the host calls these from one thread; Watch's callback runs on
// the provider's threads.
#pragma once

#include <functional>

#include "silo/cluster/routing/grain_host_check.h"
#include "storage/grain_storage.h"
#include "storage/membership_table.h"

namespace grpc {
class ServerBuilder;
}  // namespace grpc

namespace granary {
class TimerQueue;
}  // namespace granary

namespace granary::silo {

class ReminderKeeper;
class Runtime;

class ClusterProvider {
 public:
  virtual ~ClusterProvider() = default;

  // True when silos other than this one may be in the cluster.
  virtual bool clustered() const = 0;
  // The membership table (owned by the provider).
  virtual storage::MembershipTable* table() = 0;
  // True when its silos reach each other through gRPC services of the silo
  // endpoint (those of AddServices, or other silos' endpoints dialled): a
  // silo of an in-process network, where no endpoint listens, cannot use it.
  virtual bool needs_silo_endpoint() const { return false; }
  // The grain storage the silo uses: `local` (from the storage provider)
  // unless the cluster shares another.
  virtual storage::GrainStorage* grain_storage(storage::GrainStorage* local) {
    return local;
  }
  // The silo that keeps this silo's reminders, when not this one.
  virtual ReminderKeeper* reminder_keeper() { return nullptr; }
  // True when the reminder table is shared and each silo schedules the
  // reminders of its own range of the directory ring (the host wires
  // ReminderService::SetRanges); the provider then serves
  // granary.v1.Reminders on the silo endpoint.
  virtual bool reminders_by_range() const { return false; }
  // Registers what this silo serves to the others on its silo endpoint
  // (`local`: its own grain storage). Called once, before the endpoint
  // starts; what it registers must outlive the endpoint.
  virtual void AddServices(grpc::ServerBuilder* builder,
                           storage::GrainStorage* local) {}
  // The silo runs (its grain types are known): services that answer for
  // it may start.
  virtual void OnSiloStarted(Runtime* silo) {}
  // Who may change a grain's state and reminders through the services of
  // AddServices (silo/cluster/routing/grain_host_check.h). Set before
  // OnSiloStarted.
  virtual void SetGrainHostCheck(GrainHostCheck check) {}
  // Pushes every new version of the table to `fn` until StopWatch; pauses
  // between attempts to reach a remote table are timers on `timers`, which
  // must outlive the watch.
  virtual void Watch(TimerQueue* timers,
                     std::function<void(const v1::MembershipView&)> fn) = 0;
  // Idempotent; no callback runs once it returns.
  virtual void StopWatch() = 0;
};

}  // namespace granary::silo
