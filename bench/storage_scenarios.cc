// The storage scenarios of granary-bench (bench/scenarios.h).
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/lifecycle.h"
#include "bench/postgres_floor.h"
#include "bench/scenario_util.h"
#include "core/detach.h"

namespace granary::bench {
namespace {

using scenario_internal::Fail;
using scenario_internal::Latch;
using scenario_internal::Scaled;
using scenario_internal::TimeEach;

StateGrainRef StateGrain(const ScenarioContext& ctx, std::string key) {
  return StateGrainRef(ctx.invoker, std::move(key));
}

StateRequest Value(int64_t v) {
  StateRequest req;
  req.set_value(v);
  req.set_pad(std::string(64, 'p'));  // a small state: 64 bytes and a value
  return req;
}

}  // namespace

// Sequential first calls to new keys, each writing the grain's state:
// activation, a read that finds nothing, one durable write.
void Create(const ScenarioContext& ctx, ScenarioResult& r) {
  r.ops = Scaled(1000, ctx.scale, 10);
  r.latencies_ns.reserve(r.ops);
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    StateGrainRef g = StateGrain(
        ctx, absl::StrCat("create-", ctx.run_id, "-", ctx.round, "-", i));
    const int64_t start = absl::GetCurrentTimeNanos();
    absl::StatusOr<StateReply> reply = g.Write(Value(i)).Get();
    r.latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
    if (!reply.ok() || reply->value() != i) ++r.errors;
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = r.errors == 0;
  if (r.errors > 0) Fail(r, absl::StrCat(r.errors, " creates failed"));
}

// Calls to grains that are deactivated with state stored: each activation
// reads the state back (verified by the value it answers). Setting up the
// stored, deactivated grains is not timed.
void Wake(const ScenarioContext& ctx, ScenarioResult& r) {
  r.ops = Scaled(500, ctx.scale, 10);
  absl::StatusOr<LifecycleCounts> base = ctx.state_lifecycle->Read();
  if (!base.ok()) {
    Fail(r, absl::StrCat("cannot read lifecycle counts: ",
                         base.status().ToString()));
    return;
  }
  std::vector<StateGrainRef> grains;
  for (int64_t i = 0; i < r.ops; ++i) {
    grains.push_back(StateGrain(
        ctx, absl::StrCat("wake-", ctx.run_id, "-", ctx.round, "-", i)));
    if (!grains.back().Write(Value(1000 + i)).Get().ok() ||
        !grains.back().Deactivate(DeactivateRequest()).Get().ok()) {
      Fail(r, "could not store and deactivate the grains to wake");
      return;
    }
  }
  absl::Status asleep = ctx.state_lifecycle->WaitForDeactivations(
      base->deactivations + r.ops, absl::Seconds(60));
  if (!asleep.ok()) {
    Fail(r, absl::StrCat("deactivations not confirmed: ", asleep.ToString()));
    return;
  }
  TimeEach(
      r, [&](int64_t i) { return grains[i].Read(StateRequest()).Get(); },
      [&](const absl::StatusOr<StateReply>& reply, int64_t i) {
        return reply.ok() && reply->value() == 1000 + i;
      });
  r.verified = true;
  absl::StatusOr<LifecycleCounts> now = ctx.state_lifecycle->Read();
  if (!now.ok()) {
    Fail(r, "cannot read lifecycle counts");
    return;
  }
  // Two activations per grain: the one that stored, the one woken.
  const int64_t acts = now->activations - base->activations;
  if (acts != 2 * r.ops) {
    Fail(r,
         absl::StrCat("OnActivate ran ", acts, " times, expected ", 2 * r.ops));
  }
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " wakes failed or lost the stored value"));
  }
}

// Sequential durable writes of one active grain's small state.
void DurableWrite(const ScenarioContext& ctx, ScenarioResult& r) {
  r.ops = Scaled(2000, ctx.scale, 10);
  StateGrainRef g = StateGrain(ctx, "durable-write");
  if (!g.Read(StateRequest()).Get().ok()) {
    Fail(r, "could not activate the grain");
    return;
  }
  TimeEach(
      r, [&](int64_t i) { return g.Write(Value(i)).Get(); },
      [&](const absl::StatusOr<StateReply>& reply, int64_t i) {
        return reply.ok() && reply->value() == i;
      });
  r.verified = true;
  absl::StatusOr<StateReply> last = g.Read(StateRequest()).Get();
  if (!last.ok() || last->value() != r.ops - 1) {
    Fail(r, "the grain does not hold the last value written");
  }
  if (r.errors > 0) Fail(r, absl::StrCat(r.errors, " writes failed"));
}

// pgbench's synced single-row UPDATE, one client: as many as DurableWrite's
// writes, so the two rows compare sample for sample.
void PostgresFloorRound(const ScenarioContext& ctx, ScenarioResult& r) {
  if (ctx.postgres_floor == nullptr) {
    Fail(r, "postgres_floor needs --storage=postgres");
    return;
  }
  ctx.postgres_floor->Run(Scaled(2000, ctx.scale, 10), r);
}

// Sequential reads of an active grain's in-memory state through a call.
void WarmRead(const ScenarioContext& ctx, ScenarioResult& r) {
  r.ops = Scaled(5000, ctx.scale, 10);
  StateGrainRef g = StateGrain(ctx, "warm-read");
  if (!g.Write(Value(42)).Get().ok()) {
    Fail(r, "could not store the state to read");
    return;
  }
  TimeEach(
      r, [&](int64_t i) { return g.Read(StateRequest()).Get(); },
      [&](const absl::StatusOr<StateReply>& reply, int64_t i) {
        return reply.ok() && reply->value() == 42;
      });
  r.verified = r.errors == 0;
  if (r.errors > 0) Fail(r, absl::StrCat(r.errors, " reads failed"));
}

}  // namespace granary::bench
