// File: bench/scenario_util.h
// -----------------------------------------------------------------------------
// Private to bench/: what the scenarios (scenarios.cc, storage_scenarios.cc)
// share: scaling, a latch, timing each call, failing a row.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "bench/scenarios.h"
#include "core/sync.h"
#include "core/task.h"
#include "examples/bench_grain.h"

namespace granary::bench::scenario_internal {

inline int64_t Scaled(double base, double scale, int64_t minimum) {
  return std::max<int64_t>(minimum, std::llround(base * scale));
}

// Counts down completions from any thread; the last one wakes the waiter.
class Latch {
 public:
  explicit Latch(int64_t n) : left_(n) {
    if (n == 0) done_.Notify();
  }
  void CountDown() {
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.Notify();
  }
  void Wait() {
    // Completions of a batch arrive microseconds apart: spin briefly, as
    // Task::Get does, before sleeping.
    for (int i = 0; i < 2000 && !done_.HasBeenNotified(); ++i) {
      internal::CpuRelax();
    }
    done_.WaitForNotification();
  }

 private:
  std::atomic<int64_t> left_;
  Notification done_;
};

// Runs call(i) for i in [0, r.ops) one after another, timing each call as
// a sample; check(reply, i), outside the timed part, says whether it did what
// was asked (else it counts in r.errors). Sets r.seconds.
template <typename Call, typename Check>
void TimeEach(ScenarioResult& r, Call call, Check check) {
  r.latencies_ns.reserve(r.latencies_ns.size() + r.ops);
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    const int64_t start = absl::GetCurrentTimeNanos();
    auto reply = call(i);
    r.latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
    if (!check(reply, i)) ++r.errors;
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
}

inline BenchGrainRef Grain(const ScenarioContext& ctx, std::string key) {
  return BenchGrainRef(ctx.invoker, std::move(key));
}

inline void Fail(ScenarioResult& r, std::string why) {
  r.verified = false;
  if (r.failure.empty()) r.failure = std::move(why);
}

}  // namespace granary::bench::scenario_internal

namespace granary::bench {

// The storage scenarios (storage_scenarios.cc): StateGrain's state read on
// activation and written before it replies.
void Create(const ScenarioContext& ctx, ScenarioResult& r);
void Wake(const ScenarioContext& ctx, ScenarioResult& r);
void DurableWrite(const ScenarioContext& ctx, ScenarioResult& r);
void WarmRead(const ScenarioContext& ctx, ScenarioResult& r);
// PostgreSQL's own synced single-row UPDATE, as many as durable-write's
// writes (bench/postgres_floor.h).
void PostgresFloorRound(const ScenarioContext& ctx, ScenarioResult& r);
// The hot spot (hotspot_scenario.cc): 16 callers at once on one grain that
// computes; a normal grain (`stateless` false) or a stateless worker.
void Hotspot(const ScenarioContext& ctx, ScenarioResult& r, bool stateless);
// Server push (push_scenario.cc): a Chat room's posts to 100 subscribers.
void Push(const ScenarioContext& ctx, ScenarioResult& r);
// Idle activations' memory (memory_scenario.cc): 100,000 TinyGrains made
// and left idle; and the bytes a TinyGrain holds itself.
void Memory(const ScenarioContext& ctx, ScenarioResult& r);
size_t TinyGrainOwnBytes();

}  // namespace granary::bench
