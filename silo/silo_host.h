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
// the provider's services), the runtime (silo/runtime/runtime.h), the
// directory client, the silo transport and the router of a cluster, the
// client gateway, the membership agent and the admin HTTP endpoint.
//
// What the silo runs in, its environment (silo/silo_environment.h), is the
// system clock and gRPC over TCP unless the caller gives another: a
// FakeClock, an in-process network (granary::testing's InProcessCluster),
// providers of its own.
//
// Each part subscribes to the stages of the host's lifecycle
// (silo/lifecycle.h gives them, and what each part does in each): Start
// runs them in order (a failure returns, and Stop undoes what ran); Stop,
// the graceful stop, runs them backwards: ShuttingDown in the table, the
// handoff of the silo's grains to their new owners, grains deactivated, the
// gateway drained, Dead in the table, HTTP, the calls other silos passed on,
// the router and transport, the listeners' guards.
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
#include "granary/v1/cluster.pb.h"
#include "silo/runtime/call_filter.h"
#include "silo/runtime/grain.h"
#include "silo/silo_environment.h"
#include "silo/silo_host_options.h"

namespace granary::directory {
class DirectoryPartition;
}  // namespace granary::directory

namespace granary::silo {

class ClusterRouter;
class GatewayServer;
class Runtime;

class SiloHost {
 public:
  explicit SiloHost(SiloHostOptions options,
                    SiloEnvironment environment = SiloEnvironment());
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
  void AddGrains(std::function<absl::Status(Runtime&)> add);
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
  // Stops at once, as a crash looks to the rest of the cluster: the row
  // stays as it is (the others declare the silo dead), nothing is handed
  // off or drained, the router and transport stop before the grains (so
  // nothing they do on the way out reaches the other silos), calls in
  // flight fail. For tests of failures in process; then Stop does nothing
  // more.
  void Halt();

  // After Start: the bound addresses, and the silo's id in the cluster
  // ("HOST:PORT@generation").
  const std::string& gateway_address() const;
  const std::string& silo_address() const;
  const std::string& http_address() const;
  const std::string& id() const;
  // The runtime, once Start created it (nullptr before).
  Runtime* silo();
  // The client gateway, once Start made it (nullptr before, or with no
  // `gateway`).
  GatewayServer* gateway();
  // The cluster's latest view as this silo knows it (empty before it
  // joined or after it left).
  v1::MembershipView membership_view() const;
  // In a cluster, once Start made them (nullptr otherwise): the router and
  // this silo's part of the directory, for tests and diagnostics.
  ClusterRouter* router();
  directory::DirectoryPartition* partition();
  // The environment's clock (the system clock unless it gave another).
  Clock* clock() const;

  struct Parts;

 private:
  // silo_host.cc
  absl::Status StartStores();
  absl::Status MakeRuntime();
  absl::Status StartRuntime();
  // silo_host_listeners.cc
  void SubscribeListeners();
  void GuardListeners();
  absl::Status StartSiloEndpoint();
  absl::Status JoinInProcessNetwork();
  void AttachPeers();
  void StopPeerCalls();
  absl::Status StartGateway();
  absl::Status StartHttp();
  // silo_host_cluster.cc
  void SubscribeCluster();
  absl::Status StartCluster();
  void SubscribeMembership();
  absl::Status JoinCluster();
  void WireCluster();
  void AddClusterMetrics();

  SiloHostOptions options_;
  std::vector<std::function<absl::Status(Runtime&)>> grain_adders_;
  std::unique_ptr<Parts> parts_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace granary::silo
