// File: silo/silo_host.h
// -----------------------------------------------------------------------------
// The composition root of a silo: builds and wires every component from one
// options struct (silo/silo_host_options.h) and runs them until Stop.
//
//   granary::silo::SiloHostOptions options;
//   options.gateway = "0.0.0.0:30000";
//   granary::silo::SiloHost host(options);
//   GRANARY_RETURN_IF_ERROR(host.AddGrain<CounterGrain>());
//   GRANARY_RETURN_IF_ERROR(host.Start());   // serving once it returns
//   ...
//   host.Stop();                             // graceful; idempotent
//
// It owns the grain storage and reminder table (from the storage provider),
// the cluster provider (membership table, and what a dev cluster shares),
// the silo endpoint (probes, the peer gateway, the directory partition and
// the provider's services), the runtime (silo/runtime/silo.h), the
// directory client, the silo transport and the router of a cluster, the
// client gateway, the membership agent and the admin HTTP endpoint.
//
// Start (each step waits for the one before; a failure undoes what ran):
//   (1) options checked, stores opened      (2) silo endpoint bound: the
//   silo's id is its address and start time  (3) runtime started with the
//   grain types added  (4) gateway and HTTP bound  (5) joined the membership
//   table: Joining, then Active.
// Stop (graceful):
//   (1) ShuttingDown in the table  (2) the owners of this silo's grains under
//   the ring without it have its rebuild report  (3) grains deactivate; in
//   a cluster their queued calls go on to their new homes  (4) the gateway
//   drains: clients send the rest elsewhere  (5) a grace for calls already
//   on their way here  (6) Dead in the table  (7) calls other silos passed
//   on finish, the silo endpoint stops  (8) router, transport, HTTP stop.
//
// Threading: AddGrain before Start; Start and Stop from one thread; the
// accessors are thread-safe once Start returned.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "silo/runtime/call_filter.h"
#include "silo/runtime/grain.h"
#include "silo/silo_host_options.h"

namespace granary::silo {

class Silo;

class SiloHost {
 public:
  explicit SiloHost(SiloHostOptions options);
  ~SiloHost();  // Stop()
  SiloHost(const SiloHost&) = delete;
  SiloHost& operator=(const SiloHost&) = delete;

  // Hosts grain implementation GrainT (deriving from a generated
  // XGrainBase), default-constructed or made by `factory()`. Before Start.
  template <typename GrainT>
  absl::Status AddGrain() {
    return AddGrainType(GrainT::ClassInfo(),
                        [] { return std::make_unique<GrainT>(); });
  }
  template <typename GrainT, typename Factory>
  absl::Status AddGrain(Factory factory) {
    return AddGrainType(
        GrainT::ClassInfo(),
        [f = std::move(factory)]() -> std::unique_ptr<Grain> { return f(); });
  }
  absl::Status AddGrainType(const GrainClassInfo& info,
                            std::function<std::unique_ptr<Grain>()> factory);
  // Registers grain types on the runtime when Start creates it (for helpers
  // taking a Silo&, such as examples::AddExampleGrains). Before Start.
  void AddGrains(std::function<absl::Status(Silo&)> add);
  // Grain call filters (silo/runtime/call_filter.h), in the order added.
  // Before Start.
  void AddIncomingFilter(CallFilter filter);
  void AddOutgoingFilter(CallFilter filter);

  // Starts everything (see above). INVALID_ARGUMENT for bad options, the
  // store's error when it cannot open, UNAVAILABLE when a listener cannot
  // bind or the cluster cannot be joined. Once.
  absl::Status Start();
  // Leaves the cluster gracefully and stops everything. Idempotent.
  void Stop();

  // After Start: the bound addresses, and the silo's id in the cluster
  // ("HOST:PORT@generation").
  const std::string& gateway_address() const;
  const std::string& silo_address() const;
  const std::string& http_address() const;
  const std::string& id() const;
  // The runtime, once Start created it (nullptr before).
  Silo* silo();

  struct Parts;

 private:
  absl::Status StartStores();
  absl::Status StartSiloEndpoint();
  absl::Status StartRuntime();
  absl::Status StartListeners();
  absl::Status JoinCluster();
  void WireCluster();

  SiloHostOptions options_;
  std::vector<std::function<absl::Status(Silo&)>> grain_adders_;
  std::unique_ptr<Parts> parts_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace granary::silo
