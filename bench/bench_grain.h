// File: bench/bench_grain.h
// -----------------------------------------------------------------------------
// The benchmark grain (granary.bench.BenchGrain) and the per-silo counters it
// reports its lifecycle into.
//
//   BenchStats stats;
//   silo.AddGrain<BenchGrainImpl>([&] { return std::make_unique<BenchGrainImpl>(&stats); });
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/sync.h"
#include "absl/time/time.h"
#include "bench/bench.grain.h"

namespace granary::silo {
class Silo;
}  // namespace granary::silo

namespace granary::bench {

// Lifecycle counts of BenchGrain activations in one silo. Thread-safe.
class BenchStats {
 public:
  void OnActivate();
  void OnDeactivate();
  int64_t activations() const;
  int64_t deactivations() const;
  // Waits until at least `n` deactivations happened; false after `limit`.
  bool WaitForDeactivations(int64_t n, absl::Duration limit);

 private:
  mutable Mutex mu_;
  int64_t activations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t deactivations_ ABSL_GUARDED_BY(mu_) = 0;
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

 private:
  BenchStats* stats_;
  int64_t count_ = 0;
  int64_t tells_ = 0;
  int64_t balls_ = 0;
  std::vector<int64_t> latencies_ns_;
  GrainEvent volley_done_;
};

absl::Status AddBenchGrains(silo::Silo& silo, BenchStats* stats);

}  // namespace granary::bench
