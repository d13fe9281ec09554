#include "bench/scenarios.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/lifecycle.h"
#include "bench/raw_echo.h"
#include "bench/scenario_util.h"
#include "bench/stats.h"
#include "core/detach.h"
#include "core/status.h"
#include "core/sync.h"
#include "examples/bench_grain.h"

namespace granary::bench {
namespace {

using scenario_internal::Fail;
using scenario_internal::Grain;
using scenario_internal::Latch;
using scenario_internal::Scaled;
using scenario_internal::TimeEach;

// First calls to batches of 100 fresh grains, each batch then deactivated;
// verified by the silo's OnActivate / OnDeactivate counts.
void Activation(const ScenarioContext& ctx, ScenarioResult& r, int kBatch,
                int64_t base_batches) {
  const int64_t batches = Scaled(base_batches, ctx.scale, 1);
  r.ops = batches * kBatch;
  r.latencies_ns.resize(r.ops);
  // With a remote silo this read may activate the grain that answers it;
  // the reply already counts that activation, so the baseline stays exact.
  absl::StatusOr<LifecycleCounts> base = ctx.lifecycle->Read();
  if (!base.ok()) {
    Fail(r, absl::StrCat("cannot read lifecycle counts: ",
                         base.status().ToString()));
    return;
  }
  std::atomic<int64_t> errors{0};
  const absl::Time t0 = absl::Now();
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<BenchGrainRef> grains;
    grains.reserve(kBatch);
    for (int i = 0; i < kBatch; ++i) {
      grains.push_back(
          Grain(ctx, absl::StrCat("act", kBatch, "-", ctx.run_id, "-",
                                  ctx.round, "-", b, "-", i)));
    }
    Latch activated(kBatch);
    for (int i = 0; i < kBatch; ++i) {
      int64_t* slot = &r.latencies_ns[b * kBatch + i];
      const int64_t start = absl::GetCurrentTimeNanos();
      PingRequest ping;
      ping.set_seq(i);
      Detach(grains[i].Ping(ping),
             [&, slot, start](absl::StatusOr<PingReply> p) {
               *slot = absl::GetCurrentTimeNanos() - start;
               if (!p.ok()) errors.fetch_add(1);
               activated.CountDown();
             });
    }
    activated.Wait();
    Latch deactivated(kBatch);
    for (int i = 0; i < kBatch; ++i) {
      Detach(grains[i].Deactivate(DeactivateRequest()),
             [&](absl::StatusOr<google::protobuf::Empty> e) {
               if (!e.ok()) errors.fetch_add(1);
               deactivated.CountDown();
             });
    }
    deactivated.Wait();
    absl::Status confirmed = ctx.lifecycle->WaitForDeactivations(
        base->deactivations + (b + 1) * kBatch, absl::Seconds(60));
    if (!confirmed.ok()) {
      Fail(r, absl::StrCat("deactivations were not confirmed: ",
                           confirmed.ToString()));
      break;
    }
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.errors = errors.load();
  r.verified = true;
  absl::StatusOr<LifecycleCounts> now = ctx.lifecycle->Read();
  if (!now.ok()) {
    Fail(r, absl::StrCat("cannot read lifecycle counts: ",
                         now.status().ToString()));
    return;
  }
  const int64_t acts = now->activations - base->activations;
  const int64_t deacts = now->deactivations - base->deactivations;
  if (acts != r.ops)
    Fail(r, absl::StrCat("OnActivate ran ", acts, " times, expected ", r.ops));
  if (deacts != r.ops)
    Fail(r,
         absl::StrCat("OnDeactivate ran ", deacts, " times, expected ", r.ops));
  if (r.errors > 0) Fail(r, absl::StrCat(r.errors, " calls failed"));
}

// One-way Tells into one grain from one outside thread, then Count.
void OneWay(const ScenarioContext& ctx, ScenarioResult& r) {
  r.ops = Scaled(10000, ctx.scale, 100);
  BenchGrainRef target = Grain(ctx, "oneway-target");
  CountRequest reset;
  reset.set_reset(true);
  if (!target.Count(reset).Get().ok()) {
    Fail(r, "could not reset the target");
    return;
  }
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    TellRequest tell;
    tell.set_amount(1);
    // Every 16th Tell carries its send time: delivery latency is sampled,
    // not paid for on every message.
    if (i % 16 == 0) tell.set_sent_ns(absl::GetCurrentTimeNanos());
    target.Tell(std::move(tell));
  }
  absl::StatusOr<CountReply> count = target.Count(reset).Get();
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = true;
  if (!count.ok()) {
    Fail(r, absl::StrCat("Count failed: ", count.status().ToString()));
    return;
  }
  r.p50_ns = count->p50_ns();
  r.p99_ns = count->p99_ns();
  if (count->count() != r.ops || count->tells() != r.ops) {
    Fail(r, absl::StrCat("grain counted ", count->count(), " in ",
                         count->tells(), " tells, expected ", r.ops));
  }
}

// The grain `ask` calls for `key`: that grain, or for a cross-silo ask
// (ctx.one_gateway) the first of the grains `key`-0, `key`-1, ... that lives
// on another silo than the one gateway's, called through that gateway. When
// none turns up the round fails.
BenchGrainRef AskTarget(const ScenarioContext& ctx, ScenarioResult& r,
                        const std::string& key) {
  if (ctx.one_gateway == nullptr) return Grain(ctx, key);
  for (int i = 0; i < 64; ++i) {
    BenchGrainRef candidate(ctx.one_gateway, absl::StrCat(key, "-", i));
    absl::StatusOr<WhereReply> w = candidate.Where(WhereRequest()).Get();
    if (w.ok() && w->silo() != ctx.one_gateway_silo) return candidate;
  }
  Fail(r, absl::StrCat("no grain for ", key, " on another silo than ",
                       ctx.one_gateway_silo));
  return Grain(ctx, key);
}

// Sequential awaited Pings from a thread outside the runtime.
void Ask(const ScenarioContext& ctx, ScenarioResult& r) {
  r.ops = Scaled(5000, ctx.scale, 100);
  r.concurrency = 1;
  r.latencies_ns.reserve(r.ops);
  BenchGrainRef target = AskTarget(ctx, r, "ask-target");
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    PingRequest ping;
    ping.set_seq(i);
    const int64_t start = absl::GetCurrentTimeNanos();
    absl::StatusOr<PingReply> reply = target.Ping(ping).Get();
    r.latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
    if (!reply.ok() || reply->seq() != i) ++r.errors;
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = r.errors == 0 && r.failure.empty();
  if (r.errors > 0)
    Fail(r, absl::StrCat(r.errors, " pings failed or mismatched"));
}

// One of the concurrent ask scenario's loops: `calls` sequential Pings to
// one grain. It runs wherever replies arrive (a silo worker, a client network
// thread), one step at a time, so its fields need no lock; the latch's
// release orders them before the reader.
struct AskLoop {
  AskLoop(BenchGrainRef target, int64_t calls)
      : target(std::move(target)), calls(calls) {}
  BenchGrainRef target;
  int64_t calls;
  std::vector<int64_t> latencies_ns;
  int64_t errors = 0;
  std::string first_error;
};

Task<void> RunAskLoop(AskLoop* loop) {
  for (int64_t i = 0; i < loop->calls; ++i) {
    PingRequest ping;
    ping.set_seq(i);
    const int64_t start = absl::GetCurrentTimeNanos();
    try {
      PingReply reply = co_await loop->target.Ping(ping);
      loop->latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
      if (reply.seq() != i) ++loop->errors;
    } catch (const StatusError& e) {
      // A call can fail inside the co_await that makes it (no gateway, a
      // closed client); going on would nest every further call inside the
      // last. Stop: the calls not made count as errors.
      loop->errors += loop->calls - i;
      loop->first_error = e.status().ToString();
      co_return;
    }
  }
}

// `concurrency` sequential Ping loops over as many grains, all running at
// once: that many awaited calls are in flight throughout. Every call's
// latency is recorded.
void AskConcurrent(const ScenarioContext& ctx, ScenarioResult& r) {
  const int k = ctx.concurrency;
  r.ops = std::max<int64_t>(Scaled(5000, ctx.scale, 100), k);
  r.concurrency = k;
  std::vector<AskLoop> loops;
  loops.reserve(k);
  for (int i = 0; i < k; ++i) {
    loops.emplace_back(AskTarget(ctx, r, absl::StrCat("ask-", i)),
                       r.ops / k + (i < r.ops % k ? 1 : 0));
    loops.back().latencies_ns.reserve(loops.back().calls);
  }
  Latch finished(k);
  const absl::Time t0 = absl::Now();
  for (AskLoop& loop : loops) {
    Detach(RunAskLoop(&loop),
           [&finished](absl::Status) { finished.CountDown(); });
  }
  finished.Wait();
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.latencies_ns.reserve(r.ops);
  std::string first_error;
  for (AskLoop& loop : loops) {
    r.latencies_ns.insert(r.latencies_ns.end(), loop.latencies_ns.begin(),
                          loop.latencies_ns.end());
    r.errors += loop.errors;
    if (first_error.empty()) first_error = loop.first_error;
  }
  r.verified = r.errors == 0 && r.failure.empty();
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " pings failed or mismatched",
                         first_error.empty() ? "" : ", first: ", first_error));
  }
}

// Sequential round trips over a plain gRPC stream to a helper process.
// One-way Tells spread round-robin over 1,000 grains from one outside
// thread, then every grain's Count. Latency is the grains' own sample of
// delivery times: p50 is the median of the grains' p50s, p99 the worst p99.
void OneWaySpread(const ScenarioContext& ctx, ScenarioResult& r) {
  constexpr int kGrains = 1000;
  r.ops = Scaled(20000, ctx.scale, kGrains);
  std::vector<BenchGrainRef> grains;
  grains.reserve(kGrains);
  CountRequest reset;
  reset.set_reset(true);
  for (int i = 0; i < kGrains; ++i) {
    grains.push_back(Grain(ctx, absl::StrCat("spread-", i)));
  }
  {
    Latch ready(kGrains);
    std::atomic<int64_t> failed{0};
    for (auto& g : grains) {
      Detach(g.Count(reset), [&](absl::StatusOr<CountReply> c) {
        if (!c.ok()) failed.fetch_add(1);
        ready.CountDown();
      });
    }
    ready.Wait();
    if (failed.load() > 0) {
      Fail(r, "could not reset the targets");
      return;
    }
  }
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    TellRequest tell;
    tell.set_amount(1);
    if (i % 16 == 0) tell.set_sent_ns(absl::GetCurrentTimeNanos());
    grains[i % kGrains].Tell(std::move(tell));
  }
  Mutex mu;
  int64_t counted = 0, tells = 0, failed = 0;
  std::vector<int64_t> p50s;
  int64_t p99 = 0;
  Latch done(kGrains);
  for (auto& g : grains) {
    Detach(g.Count(reset), [&](absl::StatusOr<CountReply> c) {
      {
        MutexLock lock(&mu);
        if (!c.ok()) {
          ++failed;
        } else {
          counted += c->count();
          tells += c->tells();
          if (c->p50_ns() > 0) p50s.push_back(c->p50_ns());  // sampled
          p99 = std::max(p99, c->p99_ns());
        }
      }
      done.CountDown();
    });
  }
  done.Wait();
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = true;
  MutexLock lock(&mu);
  r.p50_ns = NearestRank(p50s, 0.5);
  r.p99_ns = p99;
  if (failed > 0) Fail(r, absl::StrCat(failed, " Count calls failed"));
  if (counted != r.ops || tells != r.ops) {
    Fail(r, absl::StrCat("grains counted ", counted, " in ", tells,
                         " tells, expected ", r.ops));
  }
}

// Sequential FanOut calls: the head grain pings `fanout` leaves at once and
// awaits them all; verified by the number of leaves that answered.
void FanOut(const ScenarioContext& ctx, ScenarioResult& r) {
  r.ops = Scaled(1000, ctx.scale, 10);
  BenchGrainRef head = Grain(ctx, "fanout");
  FanOutRequest req;
  req.set_width(ctx.fanout);
  TimeEach(
      r, [&](int64_t i) { return head.FanOut(req).Get(); },
      [&](const absl::StatusOr<FanOutReply>& reply, int64_t i) {
        return reply.ok() && reply->replies() == ctx.fanout;
      });
  r.verified = r.errors == 0;
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " fan-outs failed or gathered fewer than ",
                         ctx.fanout, " replies"));
  }
}

void RawGrpc(const ScenarioContext& ctx, ScenarioResult& r) {
  r.concurrency = 1;
  if (ctx.raw_echo == nullptr) {
    Fail(r, "raw_grpc needs a remote run (--target)");
    return;
  }
  ctx.raw_echo->PingPong(Scaled(5000, ctx.scale, 100), &r);
}

// Keys of `links` BenchGrains, each on another silo than the one before
// (round robin over the silos the grains landed on); empty when they all
// live on one silo. Grains are activated to find their silo (Where), with
// the grain type's placement (HASH for BenchGrain).
std::vector<std::string> CrossSiloPath(const ScenarioContext& ctx, int links) {
  std::map<std::string, std::vector<std::string>> by_silo;
  for (int i = 0; i < 64 * links; ++i) {
    std::string key = absl::StrCat("chain-", ctx.run_id, "-", i);
    absl::StatusOr<WhereReply> w = Grain(ctx, key).Where(WhereRequest()).Get();
    if (!w.ok()) continue;
    by_silo[w->silo()].push_back(std::move(key));
    if (by_silo.size() >= 2) {
      bool enough = true;
      for (const auto& [silo, keys] : by_silo) {
        enough = enough &&
                 keys.size() * by_silo.size() >= static_cast<size_t>(links);
      }
      if (enough && i >= 16 * links) break;  // a fair chance to see every silo
    }
  }
  if (by_silo.size() < 2) return {};
  std::vector<std::vector<std::string>*> silos;
  for (auto& [silo, keys] : by_silo) silos.push_back(&keys);
  std::vector<std::string> path;
  for (int d = 0; d < links; ++d) {
    std::vector<std::string>& keys =
        *silos[static_cast<size_t>(d) % silos.size()];
    if (keys.empty()) return {};
    path.push_back(keys.back());
    keys.pop_back();
  }
  return path;
}

// Sequential awaited call chains of `chain_depth` grains; in a cluster each
// link is on another silo than the one before.
void Chain(const ScenarioContext& ctx, ScenarioResult& r) {
  r.ops = Scaled(2000, ctx.scale, 20);
  BenchGrainRef head = Grain(ctx, "chain");
  ChainRequest req;
  req.set_depth(ctx.chain_depth);
  if (ctx.cluster) {
    std::vector<std::string> path = CrossSiloPath(ctx, ctx.chain_depth + 1);
    if (path.empty()) {
      Fail(r, "cannot place the chain's links on different silos");
      return;
    }
    head = Grain(ctx, path[0]);
    req.mutable_path()->Add(path.begin() + 1, path.end());
  }
  TimeEach(
      r, [&](int64_t i) { return head.Chain(req).Get(); },
      [&](const absl::StatusOr<ChainReply>& reply, int64_t i) {
        return reply.ok() && reply->depth_reached() == ctx.chain_depth;
      });
  r.verified = r.errors == 0;
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " chains failed or fell short of depth ",
                         ctx.chain_depth));
  }
}

// Two grains volleying one-way balls, in volleys of 1,000 exchanges; a sample
// is a volley's time divided by its exchanges (so p50/p99 are per-exchange
// times averaged within a volley, not single-exchange latencies).
void PingPong(const ScenarioContext& ctx, ScenarioResult& r) {
  constexpr int64_t kVolley = 1000;
  const int64_t volleys = Scaled(10, ctx.scale, 1);
  r.ops = volleys * kVolley;
  BenchGrainRef a = Grain(ctx, "pingpong-a");
  BenchGrainRef b = Grain(ctx, "pingpong-b");
  CountRequest reset;
  reset.set_reset(true);
  if (!a.Count(reset).Get().ok() || !b.Count(reset).Get().ok()) {
    Fail(r, "could not reset the players");
    return;
  }
  PingPongRequest req;
  req.set_peer("pingpong-b");
  req.set_exchanges(kVolley);
  const absl::Time t0 = absl::Now();
  for (int64_t v = 0; v < volleys; ++v) {
    const int64_t start = absl::GetCurrentTimeNanos();
    absl::StatusOr<PingPongReply> reply = a.PingPong(req).Get();
    r.latencies_ns.push_back((absl::GetCurrentTimeNanos() - start) / kVolley);
    if (!reply.ok() || reply->exchanges() != kVolley) ++r.errors;
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  absl::StatusOr<CountReply> ca = a.Count(reset).Get();
  absl::StatusOr<CountReply> cb = b.Count(reset).Get();
  r.verified = true;
  if (!ca.ok() || !cb.ok()) {
    Fail(r, "could not read the players' counts");
    return;
  }
  if (ca->balls() + cb->balls() != r.ops) {
    Fail(r, absl::StrCat("players received ", ca->balls() + cb->balls(),
                         " balls, expected ", r.ops));
  }
  if (r.errors > 0) Fail(r, absl::StrCat(r.errors, " volleys failed"));
}

}  // namespace

ScenarioResult RunScenario(absl::string_view name, const ScenarioContext& ctx) {
  ScenarioResult r;
  r.scenario = std::string(name);
  auto resident = [&ctx]() -> int64_t {
    return ctx.silo_resident_bytes ? ctx.silo_resident_bytes()
                                   : ResidentBytes();
  };
  const int64_t rss0 = resident();
  if (name == "activation")
    Activation(ctx, r, /*batch=*/100, 100);
  else if (name == "activation_one")
    Activation(ctx, r, /*batch=*/1, 2000);
  else if (name == "oneway")
    OneWay(ctx, r);
  else if (name == "oneway_spread")
    OneWaySpread(ctx, r);
  else if (name == "fanout")
    FanOut(ctx, r);
  else if (name == "create")
    Create(ctx, r);
  else if (name == "wake")
    Wake(ctx, r);
  else if (name == "durable-write")
    DurableWrite(ctx, r);
  else if (name == "warm-read")
    WarmRead(ctx, r);
  else if (name == "ask" && ctx.concurrency > 1)
    AskConcurrent(ctx, r);
  else if (name == "ask")
    Ask(ctx, r);
  else if (name == "chain")
    Chain(ctx, r);
  else if (name == "pingpong")
    PingPong(ctx, r);
  else if (name == "raw_grpc")
    RawGrpc(ctx, r);
  else if (name == "postgres_floor")
    PostgresFloorRound(ctx, r);
  else if (name == "hotspot")
    Hotspot(ctx, r, /*stateless=*/false);
  else if (name == "stateless")
    Hotspot(ctx, r, /*stateless=*/true);
  else if (name == "push")
    Push(ctx, r);
  else if (name == "memory")
    Memory(ctx, r);
  else if (IsFilterScenario(name)) {
    const bool filtered = absl::EndsWith(name, "_filtered");
    CallInvoker* twin =
        filtered ? ctx.filtered_invoker : ctx.unfiltered_invoker;
    if (twin == nullptr) {
      Fail(r, "no silo of the call filter scenarios: needs --hosted");
    } else {
      ScenarioContext on_twin = ctx;
      on_twin.invoker = twin;
      if (absl::StartsWith(name, "ask"))
        Ask(on_twin, r);
      else
        Chain(on_twin, r);
    }
  } else
    Fail(r, "unknown scenario");
  if (!r.rss_measured) r.rss_delta_bytes = resident() - rss0;
  if (!r.latencies_ns.empty()) {
    r.p50_ns = NearestRank(r.latencies_ns, 0.50);
    r.p99_ns = NearestRank(r.latencies_ns, 0.99);
  }
  return r;
}

}  // namespace granary::bench
