// File: silo/silo_host_parts.h
// -----------------------------------------------------------------------------
// SiloHost's parts (silo/silo_host.h), shared by the files that subscribe
// them to the host's lifecycle (silo/lifecycle.h): silo_host.cc (the stores
// and the runtime), silo_host_listeners.cc (the silo endpoint, the client
// gateway, HTTP) and silo_host_cluster.cc (the cluster's parts and
// membership). Not for other users.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/address.h"
#include "core/clock.h"
#include "core/labels.h"
#include "core/log.h"
#include "core/member.h"
#include "core/sync.h"
#include "core/timer_queue.h"
#include "directory/directory_client.h"
#include "directory/directory_service.h"
#include "directory/partition.h"
#include "grpcpp/grpcpp.h"
#include "rpc/callback_queue.h"
#include "rpc/credentials.h"
#include "rpc/listener_guard.h"
#include "rpc/security.h"
#include "silo/admin/admin_http.h"
#include "silo/admin/http_server.h"
#include "silo/cluster/cluster_provider.h"
#include "silo/cluster/membership_agent.h"
#include "silo/cluster/membership_service.h"
#include "silo/cluster/reminder_remote.h"
#include "silo/cluster/routing/cluster_router.h"
#include "silo/cluster/transport.h"
#include "silo/gateway/gateway_server.h"
#include "silo/gateway/gateway_service.h"
#include "silo/lifecycle.h"
#include "silo/listener_watch.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/runtime.h"
#include "silo/silo_environment.h"
#include "silo/silo_host.h"
#include "silo/systemd_notify.h"

namespace granary::silo {

// The grain types the live members of the latest view host.
class HostedTypes {
 public:
  void OnView(const v1::MembershipView& view) {
    absl::flat_hash_set<std::string> types;
    for (const v1::Member& m : view.members()) {
      if (!IsLive(m)) continue;
      types.insert(m.grain_types().begin(), m.grain_types().end());
    }
    MutexLock lock(&mu_);
    types_ = std::move(types);
  }
  bool Contains(absl::string_view type) const {
    MutexLock lock(&mu_);
    return types_.contains(type);
  }

 private:
  mutable Mutex mu_;
  absl::flat_hash_set<std::string> types_ ABSL_GUARDED_BY(mu_);
};

// Declared in the order they are made; each outlives what uses it.
struct SiloHost::Parts {
  explicit Parts(SiloEnvironment e)
      : env(std::move(e)),
        clock(env.clock != nullptr ? env.clock : Clock::System()),
        timers(std::make_shared<TimerThread>(clock)),
        partition("", env.clock) {}

  SiloEnvironment env;
  Clock* const clock;
  // The one timer thread of the silo: the runtime's, the router's, the
  // membership agent's and the peer connections' timers all fire on it.
  const std::shared_ptr<TimerThread> timers;
  Lifecycle lifecycle;
  // When the graceful stop must be done by (set as Stop begins), and the
  // part of it left for a step: at most `limit`, at least `floor` even once
  // the budget is spent. On `clock`.
  absl::Time stop_deadline = absl::InfiniteFuture();
  absl::Duration Left(absl::Duration limit,
                      absl::Duration floor = absl::ZeroDuration()) const {
    return std::clamp(stop_deadline - clock->Now(), std::min(floor, limit),
                      limit);
  }
  // Calls the gateway and HTTP requests refused for their bearer token.
  rpc::AuthCounters gateway_refused;
  std::atomic<int64_t> http_refused{0};
  StorageStores stores;
  std::unique_ptr<ClusterProvider> cluster;
  MembershipOptions membership;
  // The silo endpoint and what it serves.
  SiloControlService control;
  std::unique_ptr<GatewayService> peer_gateway;
  // Dead silos' grace on the environment's clock (MonoNanos without one).
  directory::DirectoryPartition partition;
  std::unique_ptr<directory::DirectoryService> directory_service;
  std::unique_ptr<grpc::Server> silo_server;
  bool silo_server_stopped = false;
  std::string silo_address;
  int64_t generation = 0;
  std::string id;
  // The runtime, and the cluster's parts of it.
  std::unique_ptr<Runtime> silo;
  std::atomic<Runtime*> silo_ptr{nullptr};  // once its grain types are added
  Labels labels;                            // --labels, parsed
  HostedTypes hosted_types;                 // by the live members of the view
  std::unique_ptr<Transport> transport;
  std::unique_ptr<directory::DirectoryClient> directory;
  std::unique_ptr<ClusterRouter> router;
  // Where a grain's reminder requests go when its range is another silo's
  // (a cluster whose reminders are scheduled by range).
  std::unique_ptr<ReminderKeeper> range_reminders;
  // Listeners and membership.
  std::unique_ptr<GatewayServer> gateway;
  std::unique_ptr<rpc::ReloadingToken> http_token;  // outlives http
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<AdminHttp> admin;
  std::unique_ptr<MembershipAgent> agent;
  std::atomic<MembershipAgent*> agent_ptr{nullptr};
  std::atomic<bool> leaving{false};  // Stop began: /readyz says 503
  bool watching = false;
  bool attached = false;  // to the environment's in-process network
  bool halting = false;   // SiloHost::Halt: no leave, no handoff
  // The gRPC listeners' caps (rpc/listener_guard.h) and their probes.
  rpc::ListenerCaps listener_caps;
  std::vector<int> guarded_ports;
  std::unique_ptr<ListenerWatch> listener_watch;

  void StopSiloEndpoint(absl::Duration grace = absl::Milliseconds(500)) {
    if (silo_server == nullptr || silo_server_stopped) return;
    silo_server_stopped = true;
    peer_gateway->Stop();
    silo_server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    silo_server->Wait();
  }
};

}  // namespace granary::silo
