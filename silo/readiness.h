// File: silo/readiness.h
// -----------------------------------------------------------------------------
// A silo's readiness and liveness, as its HTTP endpoint serves them to a
// supervisor (Kubernetes probes, a load balancer, systemd):
//   /readyz   200 "ready" while the silo takes work; 503 "not ready: WHY"
//             while it joins or leaves the cluster, has not been confirmed
//             by the membership table within its lease (the table's
//             database is down), a gRPC listener failed its last probe, or
//             its storage cannot write (the reason is in its log).
//   /healthz  200 "ok" unless a gRPC listener has stopped accepting (the
//             supervisor then restarts the silo).
//
//   ServeProbes(&http, ReadinessSources{&leaving, &agent, silo, store, watch});
//
// Threading: NotReadyBecause and the handlers are thread-safe; the sources
// must outlive the HTTP server's handlers.
#pragma once

#include <atomic>
#include <string>

#include "storage/grain_storage.h"

namespace granary::silo {

class HttpServer;
class ListenerWatch;
class MembershipAgent;
class Runtime;

struct ReadinessSources {
  const std::atomic<bool>* leaving;            // the graceful stop began
  const std::atomic<MembershipAgent*>* agent;  // set once joined
  Runtime* silo;
  storage::GrainStorage* storage;  // nullptr: none to check
  ListenerWatch* watch;
};

// Why the silo should get no new work, or "" when it is ready.
std::string NotReadyBecause(const ReadinessSources& sources);

// Serves /readyz and /healthz on `http` (before it starts).
void ServeProbes(HttpServer* http, ReadinessSources sources);

}  // namespace granary::silo
