// File: bench/lifecycle.h
// -----------------------------------------------------------------------------
// How the activation scenario learns what OnActivate / OnDeactivate did in the
// silo that hosts the BenchGrains: from the in-process BenchStats (--hosted)
// or through the BenchGrain.Lifecycle RPC (--target).
//
//   HostedLifecycle hosted(&stats);           // in-process silo
//   RemoteLifecycle remote({client.get()});   // a silo behind a gateway
//   absl::StatusOr<LifecycleCounts> base = remote.Read();
//   ... activate and deactivate 100 grains ...
//   absl::Status s = remote.WaitForDeactivations(base->deactivations + 100,
//                                                absl::Seconds(60));
//
// The remote counts are of whole silos: they are exact only while this run is
// their one client (and no grain of an earlier run is collected meanwhile).
// Calling Lifecycle activates one BenchGrain (key "lifecycle") in each silo;
// the first Read() includes those activations, so counts taken after it stay
// exact.
//
// Threading: both implementations are thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "examples/bench_grain.h"

namespace granary::bench {

struct LifecycleCounts {
  int64_t activations = 0;
  int64_t deactivations = 0;
};

class LifecycleCounter {
 public:
  virtual ~LifecycleCounter() = default;
  // The counts now.
  virtual absl::StatusOr<LifecycleCounts> Read() = 0;
  // OK once at least `n` deactivations happened; DEADLINE_EXCEEDED when
  // `limit` passed first; the read's error when the counts cannot be read.
  virtual absl::Status WaitForDeactivations(int64_t n,
                                            absl::Duration limit) = 0;
};

// The counts of an in-process silo; waits sleep on BenchStats' condition.
class HostedLifecycle final : public LifecycleCounter {
 public:
  explicit HostedLifecycle(BenchStats* stats) : stats_(stats) {}
  absl::StatusOr<LifecycleCounts> Read() override;
  absl::Status WaitForDeactivations(int64_t n, absl::Duration limit) override;

 private:
  BenchStats* const stats_;
};

// The summed counts of silos, each reached through its own invoker (a
// granary::Client connected to that silo's gateway only), from its
// SiloStats grain; a wait polls them every `poll_period`. Polling is fine in
// the load generator, which owns the machine while it measures; tests wait on
// events instead.
class RemoteLifecycle final : public LifecycleCounter {
 public:
  // Whose counts: BenchGrains' or StateGrains'.
  enum class Grains { kBench, kState };
  // `keys[i]` names silo i's SiloStats grain (its gateway's address).
  RemoteLifecycle(const std::vector<CallInvoker*>& silos,
                  const std::vector<std::string>& keys,
                  absl::Duration poll_period = absl::Milliseconds(1),
                  Grains grains = Grains::kBench);
  absl::StatusOr<LifecycleCounts> Read() override;
  absl::Status WaitForDeactivations(int64_t n, absl::Duration limit) override;

 private:
  // Each silo's SiloStats grain.
  std::vector<SiloStatsRef> stats_;
  const Grains grains_;
  const absl::Duration poll_period_;
};

}  // namespace granary::bench
