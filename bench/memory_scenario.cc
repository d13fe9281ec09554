// The `memory` scenario: what an idle activation costs its silo. 100,000
// activations of granary.bench.TinyGrain (one int64 field; × --scale) are
// made, each by one Touch, and left idle; one op is one activation. The
// figure is the silo's resident memory growth over the round (its gateway's
// Status, or this process's when hosted), read after a settle, divided by
// the activations (RESULTS.md: bytes per activation).
//
// The grains stay active (their idle timeout is minutes), so a round's
// activations add to the ones before: nothing they free is reused by the
// next round. That is also why it is not among the default scenarios: the
// activations it leaves would weigh on every scenario run after it.
//
// Verified: every first Touch answered 1 (a fresh activation), and after
// the reading every grain answers a second Touch with 2 (all were still
// active when memory was read).
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/scenario_util.h"
#include "bench/stats.h"
#include "core/detach.h"
#include "examples/bench_grain.h"

namespace granary::bench {
namespace {

using scenario_internal::Fail;
using scenario_internal::Latch;
using scenario_internal::Scaled;

// Touches in flight at once (within every gateway's --max_in_flight).
constexpr int kWindow = 256;
// How long the silo settles before its memory is read.
constexpr absl::Duration kSettle = absl::Seconds(1);

// Touches every grain of `keys` once, `kWindow` at a time; counts the
// replies that are not `want` (and errors) in `*wrong`, with the first
// failure in `*first`. Latencies go to `latencies_ns` when given.
void TouchAll(const ScenarioContext& ctx, const std::vector<std::string>& keys,
              int64_t want, std::vector<int64_t>* latencies_ns,
              std::atomic<int64_t>* wrong, std::string* first) {
  std::atomic<bool> noted{false};
  for (size_t start = 0; start < keys.size(); start += kWindow) {
    const size_t end = std::min(keys.size(), start + kWindow);
    Latch done(static_cast<int64_t>(end - start));
    for (size_t i = start; i < end; ++i) {
      const int64_t sent = absl::GetCurrentTimeNanos();
      Detach(TinyGrainRef(ctx.invoker, keys[i]).Touch(TouchRequest()),
             [&, i, sent](absl::StatusOr<TouchReply> reply) {
               if (latencies_ns != nullptr) {
                 (*latencies_ns)[i] = absl::GetCurrentTimeNanos() - sent;
               }
               if (!reply.ok() || reply->touches() != want) {
                 wrong->fetch_add(1);
                 if (!noted.exchange(true)) {
                   *first = reply.ok()
                                ? absl::StrCat(keys[i], " answered ",
                                               reply->touches(), ", not ", want)
                                : absl::StrCat(keys[i], ": ",
                                               reply.status().ToString());
                 }
               }
               done.CountDown();
             });
    }
    done.Wait();
  }
}

}  // namespace

size_t TinyGrainOwnBytes() {
  return sizeof(TinyGrainImpl) - sizeof(TinyGrainGrainBase);
}

void Memory(const ScenarioContext& ctx, ScenarioResult& r) {
  const int64_t n = Scaled(100000, ctx.scale, 100);
  std::vector<std::string> keys;
  keys.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    keys.push_back(absl::StrCat("mem-", ctx.run_id, "-", ctx.round, "-", i));
  }
  auto resident = [&ctx]() -> int64_t {
    return ctx.silo_resident_bytes ? ctx.silo_resident_bytes()
                                   : ResidentBytes();
  };
  r.ops = n;
  r.latencies_ns.resize(n);  // hosted, the measuring process is the silo
  absl::SleepFor(kSettle);   // what the scenario before it freed, settled
  const int64_t before = resident();
  std::atomic<int64_t> wrong{0};
  std::string first;
  const absl::Time t0 = absl::Now();
  TouchAll(ctx, keys, 1, &r.latencies_ns, &wrong, &first);
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  absl::SleepFor(kSettle);
  const int64_t after = resident();
  r.rss_delta_bytes = after - before;
  r.rss_measured = true;
  r.verified = true;
  if (before <= 0 || after <= 0)
    Fail(r, "the silo's resident memory is unknown");
  if (wrong.load() > 0) {
    r.errors = wrong.load();
    Fail(r, absl::StrCat(wrong.load(), " of ", n,
                         " first touches were not fresh activations (", first,
                         ")"));
    return;
  }
  TouchAll(ctx, keys, 2, nullptr, &wrong, &first);
  if (wrong.load() > 0) {
    r.errors = wrong.load();
    Fail(r, absl::StrCat(wrong.load(), " of ", n,
                         " grains were no longer active after the reading (",
                         first, ")"));
  }
}

}  // namespace granary::bench
