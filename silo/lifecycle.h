// File: silo/lifecycle.h
// -----------------------------------------------------------------------------
// The stages a silo host (silo/silo_host.h) starts in, and the lifecycle
// that runs them: each part of a silo subscribes what it does when its
// stage starts and when it stops, so an optional part (the cluster's
// routing, the HTTP endpoint) drops in with its subscriptions instead of
// branches in the host. Orleans' ServiceLifecycleStage is the model.
//
//   Lifecycle lifecycle;
//   lifecycle.Subscribe(Stage::kStores, "stores", [&] { return Open(); },
//                       [&] { Close(); });
//   GRANARY_RETURN_IF_ERROR(lifecycle.Start());  // stage by stage, rising
//   ...
//   lifecycle.Stop();                            // falling, every stop
//
// Start runs the starts in rising stage order (within a stage, in the order
// subscribed) and ends at the first that fails, returning its error (the
// log names the subscriber). Stop runs every stop in falling stage order
// (within a stage, in the reverse order subscribed), whatever Start
// reached: a stop undoes only what its part made, and does nothing when
// its part never started. A part whose stop must come at another point of
// the shutdown than its start subscribes twice.
//
// A start may subscribe more parts at later stages (the cluster provider,
// once open, adds the cluster's); subscribing to a stage already entered
// is a bug (GRANARY_CHECK).
//
// Threading: Subscribe before Start or from a start; Start and Stop from
// one thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace granary::silo {

// A silo host's stages. Start runs them from the top of this list down,
// Stop from the bottom up; what the host's parts do in each (start / stop):
enum class Stage : int {
  // Options checked; the grain storage, reminder table and cluster provider
  // open. / -
  kStores = 1000,
  // Other silos can reach this one: the silo endpoint listens (or the silo
  // joins its in-process network); the silo's id is known. / The listeners'
  // connection guards are lifted.
  kSiloEndpoint = 2000,
  // The runtime is made, with its grain types and call filters. / -
  kRuntime = 3000,
  // In a cluster: the transport to the other silos, the directory client
  // and the router; reminders follow the ring. / The router and the
  // transport stop.
  kCluster = 4000,
  // The runtime starts; calls from other silos and the cluster provider's
  // services reach it. / Calls other silos passed on finish; nothing more
  // arrives from them.
  kPeerCalls = 5000,
  // The client gateway and the HTTP endpoint listen. / HTTP stops.
  kListeners = 6000,
  // The silo joins the membership table: Joining, then Active. / Dead in the
  // table (a graceful exit).
  kMembership = 7000,
  // - / The client gateway drains: clients send the rest elsewhere.
  kClientCalls = 8000,
  // - / The grains deactivate (state written); in a cluster, calls queued
  // for them go on to their new homes.
  kGrains = 9000,
  // - / In a cluster: the owners of this silo's grains under the ring
  // without it have its rebuild report (so its grains' calls find them).
  kHandoff = 9500,
  // Serving: a supervisor (systemd) is told. / ShuttingDown in the table,
  // /readyz says 503.
  kActive = 10000,
};

// The stage's name ("stores", "silo_endpoint", ...).
absl::string_view StageName(Stage stage);

class Lifecycle {
 public:
  using StartFn = std::function<absl::Status()>;
  using StopFn = std::function<void()>;

  // `start` (may be null) runs at `stage` of Start, `stop` (may be null) at
  // `stage` of Stop. `name` labels its errors and the log.
  void Subscribe(Stage stage, std::string name, StartFn start,
                 StopFn stop = nullptr);

  // OK once every start ran; else the first error. Once.
  absl::Status Start();
  // Every stop, falling. Idempotent.
  void Stop();

  // The highest stage Start has entered (0 before any).
  int reached() const { return reached_; }

 private:
  struct Subscriber {
    Stage stage;
    std::string name;
    StartFn start;
    StopFn stop;
    int order;
  };
  std::vector<Subscriber> subscribers_;
  int reached_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace granary::silo
