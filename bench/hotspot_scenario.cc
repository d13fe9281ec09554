// The hot spot scenarios (bench/scenario_util.h): many callers at once on
// one grain that computes.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/scenario_util.h"
#include "core/detach.h"
#include "core/status.h"
#include "examples/bench_grain.h"

namespace granary::bench {
namespace {

using scenario_internal::Fail;
using scenario_internal::Latch;
using scenario_internal::Scaled;

// The hot spot scenarios: kHotspotCallers sequential loops of Work calls,
// all on one grain at once, each call spinning kHotspotWorkNs of CPU. A
// normal grain (`hotspot`) serves them one at a time on one activation; a
// stateless worker (`stateless`) on a pool of activations.
constexpr int kHotspotCallers = 16;
constexpr int64_t kHotspotWorkNs = 20000;

struct WorkLoop {
  std::function<Task<WorkReply>(WorkRequest)> call;
  int64_t calls = 0;
  std::vector<int64_t> latencies_ns;
  int64_t errors = 0;
  std::set<uint64_t> activations;
  std::string first_error;
};

Task<void> RunWorkLoop(WorkLoop* loop) {
  for (int64_t i = 0; i < loop->calls; ++i) {
    WorkRequest req;
    req.set_seq(i);
    req.set_work_ns(kHotspotWorkNs);
    const int64_t start = absl::GetCurrentTimeNanos();
    try {
      WorkReply reply = co_await loop->call(std::move(req));
      loop->latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
      if (reply.seq() != i) ++loop->errors;
      loop->activations.insert(reply.activation_id());
    } catch (const StatusError& e) {
      loop->errors += loop->calls - i;  // see RunAskLoop
      loop->first_error = e.status().ToString();
      co_return;
    }
  }
}

}  // namespace

void Hotspot(const ScenarioContext& ctx, ScenarioResult& r, bool stateless) {
  const int k = kHotspotCallers;
  r.ops = std::max<int64_t>(Scaled(4000, ctx.scale, 100), k);
  r.concurrency = k;
  const std::string key = absl::StrCat("hot-", ctx.run_id, "-", ctx.round);
  std::vector<WorkLoop> loops(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    WorkLoop& loop = loops[static_cast<size_t>(i)];
    loop.calls = r.ops / k + (i < r.ops % k ? 1 : 0);
    loop.latencies_ns.reserve(static_cast<size_t>(loop.calls));
    if (stateless) {
      StatelessWorkGrainRef g(ctx.invoker, key);
      loop.call = [g](WorkRequest req) { return g.Work(std::move(req)); };
    } else {
      WorkGrainRef g(ctx.invoker, key);
      loop.call = [g](WorkRequest req) { return g.Work(std::move(req)); };
    }
  }
  Latch finished(k);
  const absl::Time t0 = absl::Now();
  for (WorkLoop& loop : loops) {
    Detach(RunWorkLoop(&loop),
           [&finished](absl::Status) { finished.CountDown(); });
  }
  finished.Wait();
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  std::set<uint64_t> activations;
  std::string first_error;
  for (WorkLoop& loop : loops) {
    r.latencies_ns.insert(r.latencies_ns.end(), loop.latencies_ns.begin(),
                          loop.latencies_ns.end());
    r.errors += loop.errors;
    activations.insert(loop.activations.begin(), loop.activations.end());
    if (first_error.empty()) first_error = loop.first_error;
  }
  r.verified = r.errors == 0;
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " work calls failed or mismatched",
                         first_error.empty() ? "" : ", first: ", first_error));
  } else if (!stateless && activations.size() != 1) {
    Fail(r, absl::StrCat("a normal grain answered from ", activations.size(),
                         " activations"));
  }
}

}  // namespace granary::bench
