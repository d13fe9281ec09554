// File: bench/compare/caf/actors.h
// -----------------------------------------------------------------------------
// The actors of the CAF comparison arm (granary-compare-caf): C++ Actor
// Framework 0.17 counterparts of what BenchGrain (examples/bench_grain.h)
// does for granary-bench, each one answering what it did so every round is
// verified.
//
//   caf::actor_system system{config};
//   caf::actor leaf = system.spawn(Pinger, /*started=*/nullptr);
//   caf::actor head = system.spawn(FanOutHead, std::vector<caf::actor>{leaf});
//   caf::scoped_actor self{system};
//   self->request(head, caf::infinite, FanOutAtom::value, int32_t{1})
//       .receive([](int32_t replies) { /* 1 */ }, [](caf::error&) {});
//
// Messages (atoms are CAF 0.17 atom constants):
//   Pinger      (ping, seq)               -> (pong, seq)
//   Counter     (tell, amount, sent_ns)      one-way
//               (count, reset)            -> (count, tells, p50_ns, p99_ns)
//   ChainLink   (chain, depth)            -> depth reached below (int32)
//   Player      (volley, peer, exchanges) -> exchanges, once the volley ends
//               (ball, remaining)            one-way, between players
//               (volley_end)                 one-way, to the volley's origin
//               (count, reset)            -> balls received (int64)
//   FanOutHead  (fanout, width)           -> replies gathered (int32)
//
// Threading: CAF runs each actor on one scheduler thread at a time; state is
// touched only by its actor. `started` counters are atomics shared with the
// driving thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "caf/all.hpp"

namespace granary::bench::compare {

using PingAtom = caf::atom_constant<caf::atom("ping")>;
using PongAtom = caf::atom_constant<caf::atom("pong")>;
using TellAtom = caf::atom_constant<caf::atom("tell")>;
using CountAtom = caf::atom_constant<caf::atom("count")>;
using ChainAtom = caf::atom_constant<caf::atom("chain")>;
using VolleyAtom = caf::atom_constant<caf::atom("volley")>;
using BallAtom = caf::atom_constant<caf::atom("ball")>;
using VolleyEndAtom = caf::atom_constant<caf::atom("volley_end")>;
using FanOutAtom = caf::atom_constant<caf::atom("fanout")>;

// Answers pings. When `started` is not null, adds one to it as it starts
// (before it handles its first message): the activation scenarios' count of
// actors that really started.
caf::behavior Pinger(caf::event_based_actor* self,
                     std::atomic<int64_t>* started);

// Sums one-way tells and samples their delivery latency (tells that carry
// their send time, in ns since the Unix epoch; 0 means none).
struct CounterState {
  int64_t count = 0;
  int64_t tells = 0;
  std::vector<int64_t> latencies_ns;
};
caf::behavior Counter(caf::stateful_actor<CounterState>* self);

// One link of a request chain: asks `next` (if any, and depth > 0) for depth
// - 1, waits for its reply without blocking (request(...).then into a
// response promise), and answers one more than it.
caf::behavior ChainLink(caf::event_based_actor* self, caf::actor next);

// One of two ping-pong players. The volley's origin sends the first ball to
// its peer; each player hits a ball back to whoever sent it until the last
// ball (remaining == 0) arrives; the origin then answers the volley request.
struct PlayerState {
  int64_t balls = 0;   // balls received since the last reset
  int64_t volley = 0;  // exchanges of the volley in progress
  std::optional<caf::typed_response_promise<int64_t>> pending;
};
caf::behavior Player(caf::stateful_actor<PlayerState>* self);

// Pings the first `width` of `leaves` at once and answers how many replied
// with the seq they were sent, once all have replied or failed.
caf::behavior FanOutHead(caf::event_based_actor* self,
                         std::vector<caf::actor> leaves);

}  // namespace granary::bench::compare
