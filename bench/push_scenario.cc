// The `push` scenario: one granary.examples.Chat room, 100 subscribers of
// its Watch stream, and posts one after another. One op is one message
// read by one subscriber (a post makes 100); latency is from the room
// taking the post (its sent_unix_ns) to each subscriber reading it.
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/scenario_util.h"
#include "core/detach.h"
#include "core/stream.h"
#include "examples/chat.granary.h"

namespace granary::bench {
namespace {

using scenario_internal::Fail;
using scenario_internal::Latch;
using scenario_internal::Scaled;

constexpr int kPushSubscribers = 100;
constexpr char kProbe[] = "probe";

struct Subscriber {
  Stream<examples::ChatMessage> stream;
  int64_t want = 0;  // posts to read
  std::vector<int64_t> latencies_ns;
  std::string error;
};

Task<void> ReadPosts(Subscriber* s) {
  examples::ChatMessage m;
  int64_t got = 0;
  while (got < s->want) {
    bool more = co_await s->stream.ReadAsync(&m);
    if (!more) {
      s->error = s->stream.status().ToString();
      co_return;
    }
    if (m.author() == kProbe) continue;
    s->latencies_ns.push_back(absl::GetCurrentTimeNanos() - m.sent_unix_ns());
    ++got;
  }
}

}  // namespace

void Push(const ScenarioContext& ctx, ScenarioResult& r) {
  const int64_t posts = Scaled(2000, ctx.scale, 50);
  r.ops = posts * kPushSubscribers;  // messages delivered
  r.concurrency = kPushSubscribers;
  examples::ChatRef room(ctx.invoker,
                         absl::StrCat("push-", ctx.run_id, "-", ctx.round));
  examples::WatchRequest watch;
  watch.set_after_seq(std::numeric_limits<uint64_t>::max());  // no replay
  std::vector<std::unique_ptr<Subscriber>> subscribers;
  for (int i = 0; i < kPushSubscribers; ++i) {
    auto s = std::make_unique<Subscriber>();
    s->stream = room.Watch(watch);
    s->want = posts;
    s->latencies_ns.reserve(static_cast<size_t>(posts));
    subscribers.push_back(std::move(s));
  }
  // Readers run from the start (they skip probes, so none piles up).
  Latch done(kPushSubscribers);
  for (auto& s : subscribers) {
    Detach(ReadPosts(s.get()), [&done](absl::Status) { done.CountDown(); });
  }
  // Ends every stream, so that no reader waits for a post that will not
  // come, and waits for the readers.
  auto stop_readers = [&subscribers, &done] {
    for (auto& s : subscribers) s->stream.Cancel();
    done.Wait();
  };
  // Every Watch has reached the room once a probe is delivered to all.
  examples::PostRequest probe;
  probe.set_author(kProbe);
  probe.set_text(kProbe);
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  for (;;) {
    absl::StatusOr<examples::PostReply> p = room.Post(probe).Get();
    if (p.ok() && p->delivered() == kPushSubscribers) break;
    if (absl::Now() > give_up) {
      stop_readers();
      Fail(r, absl::StrCat("subscribers did not all arrive: ",
                           p.ok() ? absl::StrCat(p->delivered())
                                  : p.status().ToString()));
      return;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  examples::PostRequest post;
  post.set_author("bench");
  post.set_text(std::string(64, 'm'));
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < posts; ++i) {
    absl::StatusOr<examples::PostReply> p = room.Post(post).Get();
    if (!p.ok() || p->delivered() != kPushSubscribers) ++r.errors;
  }
  if (r.errors > 0) {
    stop_readers();  // some posts will never arrive
  } else {
    done.Wait();
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  std::string first_error;
  for (auto& s : subscribers) {
    r.latencies_ns.insert(r.latencies_ns.end(), s->latencies_ns.begin(),
                          s->latencies_ns.end());
    if (!s->error.empty()) {
      ++r.errors;
      if (first_error.empty()) first_error = s->error;
    }
  }
  subscribers.clear();  // cancels the streams
  r.verified = r.errors == 0;
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " posts or subscribers failed",
                         first_error.empty() ? "" : ", first: ", first_error));
  }
}

}  // namespace granary::bench
