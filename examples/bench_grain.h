// File: examples/bench_grain.h
// -----------------------------------------------------------------------------
// The benchmark grain (granary.bench.BenchGrain) and the per-silo counters it
// reports its lifecycle into.
//
//   BenchStats stats;
//   silo.AddGrain<BenchGrainImpl>([&] { return
//   std::make_unique<BenchGrainImpl>(&stats); });
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/sync.h"
#include "examples/bench.grain.h"

namespace granary::silo {
class Runtime;
}  // namespace granary::silo

namespace granary::bench {

// Lifecycle counts of BenchGrain activations in one silo. Thread-safe;
// counting is a relaxed atomic add, so the counters do not contend the
// workers they measure. Only a waiter's wake-up takes the mutex.
class BenchStats {
 public:
  void OnActivate();
  void OnDeactivate();
  int64_t activations() const;
  int64_t deactivations() const;
  // Waits until at least `n` deactivations happened; false after `limit`.
  bool WaitForDeactivations(int64_t n, absl::Duration limit);

 private:
  std::atomic<int64_t> activations_{0};
  std::atomic<int64_t> deactivations_{0};
  // The count a waiter waits for; INT64_MAX when nobody waits.
  std::atomic<int64_t> wanted_{INT64_MAX};
  Mutex mu_;
  CondVar reached_;
};

class BenchGrainImpl final : public BenchGrainGrainBase {
 public:
  explicit BenchGrainImpl(BenchStats* stats) : stats_(stats) {}

  Task<void> OnActivate() override;
  Task<void> OnDeactivate() override;

  Task<PingReply> Ping(const PingRequest& request) override;
  Task<void> Tell(const TellRequest& request) override;
  Task<CountReply> Count(const CountRequest& request) override;
  Task<ChainReply> Chain(const ChainRequest& request) override;
  Task<PingPongReply> PingPong(const PingPongRequest& request) override;
  Task<void> Ball(const BallRequest& request) override;
  Task<WhereReply> Where(const WhereRequest& request) override;
  Task<google::protobuf::Empty> Deactivate(
      const DeactivateRequest& request) override;
  Task<LifecycleReply> Lifecycle(const LifecycleRequest& request) override;
  Task<FanOutReply> FanOut(const FanOutRequest& request) override;

 private:
  BenchStats* stats_;
  int64_t count_ = 0;
  int64_t tells_ = 0;
  int64_t balls_ = 0;
  std::vector<int64_t> latencies_ns_;
  GrainEvent volley_done_;
};

// The hot spot scenarios' grains: Work spins for the request's work_ns.
class WorkGrainImpl final : public WorkGrainGrainBase {
 public:
  Task<WorkReply> Work(const WorkRequest& request) override;
};
class StatelessWorkGrainImpl final : public StatelessWorkGrainGrainBase {
 public:
  Task<WorkReply> Work(const WorkRequest& request) override;
};

// The balance scenario's grains: Where spins for the request's work_ns and
// names the silo.
class BalancedGrainImpl final : public BalancedGrainGrainBase {
 public:
  Task<WhereReply> Where(const WhereRequest& request) override;
};
class ScatteredGrainImpl final : public ScatteredGrainGrainBase {
 public:
  Task<WhereReply> Where(const WhereRequest& request) override;
};
class HotGrainImpl final : public HotGrainGrainBase {
 public:
  Task<WhereReply> Where(const WhereRequest& request) override;
};

// The memory scenario's grain: its one field is all the grain itself holds;
// the rest of an idle activation's memory is the runtime's.
class TinyGrainImpl final : public TinyGrainGrainBase {
 public:
  Task<TouchReply> Touch(const TouchRequest& request) override;

 private:
  int64_t touches_ = 0;
};

// A grain with persistent state, for the storage scenarios.
class StateGrainImpl final : public StateGrainGrainBase {
 public:
  explicit StateGrainImpl(BenchStats* stats) : stats_(stats) {
    PersistState(&state_);
  }

  Task<void> OnActivate() override;
  Task<void> OnDeactivate() override;

  Task<StateReply> Write(const StateRequest& request) override;
  Task<StateReply> Read(const StateRequest& request) override;
  Task<google::protobuf::Empty> Deactivate(
      const DeactivateRequest& request) override;
  Task<LifecycleReply> Lifecycle(const LifecycleRequest& request) override;

 private:
  BenchStats* stats_;
  BenchState state_;
};

// Registers BenchGrain (counting into `stats`) and StateGrain (counting
// into `state_stats`).
// SiloStats: this silo's counts.
class SiloStatsImpl final : public SiloStatsGrainBase {
 public:
  SiloStatsImpl(BenchStats* bench, BenchStats* state)
      : bench_(bench), state_(state) {}
  Task<LifecycleReply> BenchLifecycle(const LifecycleRequest& request) override;
  Task<LifecycleReply> StateLifecycle(const LifecycleRequest& request) override;

 private:
  BenchStats* const bench_;
  BenchStats* const state_;
};

absl::Status AddBenchGrains(silo::Runtime& silo, BenchStats* stats,
                            BenchStats* state_stats);

}  // namespace granary::bench
