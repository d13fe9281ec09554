// File: rpc/reconnector.h
// -----------------------------------------------------------------------------
// The thread that brings the lost connections of GatewaySets
// (rpc/gateway_set.h) back up, refreshes their lists of gateways and hands
// on the calls of connections their gateway told to go. A client's set has
// one of its own; a silo has one for all its peers, so its threads do not
// grow with the cluster.
//
//   auto reconnector = std::make_shared<Reconnector>();
//   reconnector->Start();
//   options.reconnector = reconnector;     // every peer's GatewaySet
//   ...
//   reconnector->Stop();                   // after the sets closed
//
// Each round it tends every set, then gives each link that is down a slice
// of the shortest reconnect_period to connect in: waiting on a channel is
// what makes gRPC progress its connection attempt (with no call on a
// channel, nothing else polls it). With nothing down it sleeps for that
// period, or until a set reports a link down.
//
// Threading: thread-safe.
#pragma once

#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "core/sync.h"

namespace granary::rpc {

class GatewaySet;

class Reconnector {
 public:
  Reconnector() = default;
  ~Reconnector();
  Reconnector(const Reconnector&) = delete;
  Reconnector& operator=(const Reconnector&) = delete;

  absl::Status Start();
  // Joins the thread. Idempotent.
  void Stop();

  // `set` is tended from now on.
  void Add(GatewaySet* set);
  // `set` is not tended after it returns (it waits out a round on it).
  void Remove(GatewaySet* set);
  // A link went down: start a round now.
  void Wake();

 private:
  void Loop();
  // Runs `fn` on `set` unless it was removed; false if it was.
  template <typename Fn>
  bool WithSet(GatewaySet* set, Fn fn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  CondVar cv_;
  absl::flat_hash_set<GatewaySet*> sets_ ABSL_GUARDED_BY(mu_);
  GatewaySet* busy_ ABSL_GUARDED_BY(mu_) = nullptr;  // being tended
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::thread::id thread_id_;  // set before any set is tended
};

}  // namespace granary::rpc
