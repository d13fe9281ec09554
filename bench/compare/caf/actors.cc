#include "bench/compare/caf/actors.h"

#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "core/percentile.h"

namespace granary::bench::compare {

caf::behavior Pinger(caf::event_based_actor* self,
                     std::atomic<int64_t>* started) {
  if (started != nullptr) started->fetch_add(1, std::memory_order_relaxed);
  return {
      [](PingAtom, int64_t seq) -> caf::result<PongAtom, int64_t> {
        return {PongAtom::value, seq};
      },
  };
}

caf::behavior Counter(caf::stateful_actor<CounterState>* self) {
  return {
      [self](TellAtom, int64_t amount, int64_t sent_ns) {
        CounterState& s = self->state;
        s.count += amount;
        ++s.tells;
        if (sent_ns > 0) {
          s.latencies_ns.push_back(absl::GetCurrentTimeNanos() - sent_ns);
        }
      },
      [self](CountAtom,
             bool reset) -> caf::result<int64_t, int64_t, int64_t, int64_t> {
        CounterState& s = self->state;
        int64_t p50 = 0, p99 = 0;
        if (!s.latencies_ns.empty()) {
          p50 = NearestRank(s.latencies_ns, 0.50);
          p99 = NearestRank(s.latencies_ns, 0.99);
        }
        const int64_t count = s.count, tells = s.tells;
        if (reset) s = CounterState();
        return {count, tells, p50, p99};
      },
  };
}

caf::behavior ChainLink(caf::event_based_actor* self, caf::actor next) {
  return {
      [self, next](ChainAtom, int32_t depth) -> caf::result<int32_t> {
        if (depth <= 0 || !next) return int32_t{0};
        caf::typed_response_promise<int32_t> promise =
            self->make_response_promise<int32_t>();
        self->request(next, caf::infinite, ChainAtom::value, depth - 1)
            .then([promise](
                      int32_t below) mutable { promise.deliver(below + 1); },
                  [promise](caf::error& e) mutable {
                    promise.deliver(std::move(e));
                  });
        return promise;
      },
  };
}

caf::behavior Player(caf::stateful_actor<PlayerState>* self) {
  return {
      [self](VolleyAtom, const caf::actor& peer,
             int64_t exchanges) -> caf::result<int64_t> {
        PlayerState& s = self->state;
        if (exchanges <= 0) return int64_t{0};
        if (s.pending.has_value()) {
          return caf::make_error(caf::sec::runtime_error,
                                 "a volley is already in progress");
        }
        s.volley = exchanges;
        s.pending = self->make_response_promise<int64_t>();
        self->send(peer, BallAtom::value, exchanges - 1);
        return *s.pending;
      },
      [self](BallAtom, int64_t remaining) {
        PlayerState& s = self->state;
        ++s.balls;
        caf::actor sender = caf::actor_cast<caf::actor>(self->current_sender());
        if (remaining > 0) {
          self->send(sender, BallAtom::value, remaining - 1);
        } else if (s.pending.has_value()) {  // the origin took the last ball
          s.pending->deliver(s.volley);
          s.pending.reset();
        } else {
          self->send(sender, VolleyEndAtom::value);
        }
      },
      [self](VolleyEndAtom) {
        PlayerState& s = self->state;
        if (s.pending.has_value()) {
          s.pending->deliver(s.volley);
          s.pending.reset();
        }
      },
      [self](CountAtom, bool reset) -> int64_t {
        const int64_t balls = self->state.balls;
        if (reset) self->state.balls = 0;
        return balls;
      },
  };
}

namespace {

// What one fan-out has gathered so far; shared by its reply handlers, which
// all run on the head actor, one at a time.
struct Gather {
  explicit Gather(int32_t width) : outstanding(width) {}
  int32_t outstanding;
  int32_t replies = 0;
};

}  // namespace

caf::behavior FanOutHead(caf::event_based_actor* self,
                         std::vector<caf::actor> leaves) {
  return {
      [self, leaves](FanOutAtom, int32_t width) -> caf::result<int32_t> {
        if (width <= 0) return int32_t{0};
        if (static_cast<size_t>(width) > leaves.size()) {
          return caf::make_error(caf::sec::invalid_argument,
                                 "fan-out wider than the leaves spawned");
        }
        caf::typed_response_promise<int32_t> promise =
            self->make_response_promise<int32_t>();
        auto gather = std::make_shared<Gather>(width);
        for (int32_t i = 0; i < width; ++i) {
          const int64_t seq = i;
          self->request(leaves[i], caf::infinite, PingAtom::value, seq)
              .then(
                  [gather, promise, seq](PongAtom, int64_t echoed) mutable {
                    if (echoed == seq) ++gather->replies;
                    if (--gather->outstanding == 0) {
                      promise.deliver(gather->replies);
                    }
                  },
                  [gather, promise](caf::error&) mutable {
                    if (--gather->outstanding == 0) {
                      promise.deliver(gather->replies);
                    }
                  });
        }
        return promise;
      },
  };
}

}  // namespace granary::bench::compare
