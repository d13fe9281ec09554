#include "bench/compare/caf/scenarios.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/compare/caf/actors.h"
#include "bench/compare/runner.h"
#include "bench/stats.h"

namespace granary::bench::compare {
namespace {

// How long a receive loop waits for the next of a batch of replies before
// it gives the round up as failed. A harness guard against a lost message,
// not a per-request deadline: the requests themselves have none.
constexpr std::chrono::seconds kStuck{60};

constexpr int kSpreadTargets = 1000;
constexpr int64_t kVolley = 1000;

// A counting actor's answer to (count, reset).
struct Tally {
  int64_t count = 0;
  int64_t tells = 0;
  int64_t p50_ns = 0;
  int64_t p99_ns = 0;
};

// Asks one counter for its tally; false with `error` set on failure.
bool ReadTally(caf::scoped_actor& self, const caf::actor& counter, bool reset,
               Tally* tally, std::string* error) {
  bool ok = false;
  self->request(counter, caf::infinite, CountAtom::value, reset)
      .receive(
          [&](int64_t count, int64_t tells, int64_t p50, int64_t p99) {
            *tally = Tally{count, tells, p50, p99};
            ok = true;
          },
          [&](caf::error& e) { *error = caf::to_string(e); });
  return ok;
}

// Asks one player how many balls it received; false with `error` set on
// failure.
bool ReadBalls(caf::scoped_actor& self, const caf::actor& player, bool reset,
               int64_t* balls, std::string* error) {
  bool ok = false;
  self->request(player, caf::infinite, CountAtom::value, reset)
      .receive(
          [&](int64_t n) {
            *balls = n;
            ok = true;
          },
          [&](caf::error& e) { *error = caf::to_string(e); });
  return ok;
}

}  // namespace

CafScenarios::CafScenarios(caf::actor_system& system,
                           CafScenarioOptions options)
    : system_(system), options_(options), self_(system) {
  ask_target_ = system_.spawn(Pinger, nullptr);
  oneway_target_ = system_.spawn(Counter);
  spread_targets_.reserve(kSpreadTargets);
  for (int i = 0; i < kSpreadTargets; ++i) {
    spread_targets_.push_back(system_.spawn(Counter));
  }
  // depth + 1 links: the head answers depth, the last link answers 0.
  caf::actor next;
  for (int i = 0; i <= options_.depth; ++i) {
    next = system_.spawn(ChainLink, next);
    chain_links_.push_back(next);
  }
  std::reverse(chain_links_.begin(), chain_links_.end());
  chain_head_ = chain_links_.front();
  player_a_ = system_.spawn(Player);
  player_b_ = system_.spawn(Player);
  fanout_leaves_.reserve(options_.fanout);
  for (int i = 0; i < options_.fanout; ++i) {
    fanout_leaves_.push_back(system_.spawn(Pinger, nullptr));
  }
  fanout_head_ = system_.spawn(FanOutHead, fanout_leaves_);
}

CafScenarios::~CafScenarios() {
  std::vector<caf::actor> all = {ask_target_, oneway_target_, player_a_,
                                 player_b_, fanout_head_};
  all.insert(all.end(), spread_targets_.begin(), spread_targets_.end());
  all.insert(all.end(), chain_links_.begin(), chain_links_.end());
  all.insert(all.end(), fanout_leaves_.begin(), fanout_leaves_.end());
  for (const caf::actor& a : all) {
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
}

const std::vector<std::string>& CafScenarios::Names() {
  static const auto* names = new std::vector<std::string>{
      "activation", "activation_one", "oneway",   "oneway_spread",
      "ask",        "chain",          "pingpong", "fanout"};
  return *names;
}

std::string CafScenarios::Unit(const std::string& scenario) {
  if (scenario == "activation" || scenario == "activation_one") {
    return "activation";
  }
  if (scenario == "oneway" || scenario == "oneway_spread") return "message";
  if (scenario == "pingpong") return "exchange";
  if (scenario == "chain") return "chain";
  if (scenario == "fanout") return "fan-out";
  return "call";
}

void CafScenarios::Run(const std::string& scenario, ScenarioResult& r) {
  if (scenario == "activation") {
    Activation(r, /*batch=*/100, /*base_batches=*/100);
  } else if (scenario == "activation_one") {
    Activation(r, /*batch=*/1, /*base_batches=*/2000);
  } else if (scenario == "oneway") {
    OneWay(r);
  } else if (scenario == "oneway_spread") {
    OneWaySpread(r);
  } else if (scenario == "ask") {
    Ask(r);
  } else if (scenario == "chain") {
    Chain(r);
  } else if (scenario == "pingpong") {
    PingPong(r);
  } else if (scenario == "fanout") {
    FanOut(r);
  } else {
    Fail(r, absl::StrCat("unknown scenario '", scenario, "'"));
  }
}

// Batches of `batch` fresh actors: spawn each, monitor it and send it a
// first ping; wait for every pong (the latency sample runs from the spawn to
// the pong); then stop them all and wait for every down message. Verified by
// the actors' own start count, the pongs and the down messages.
void CafScenarios::Activation(ScenarioResult& r, int batch,
                              int64_t base_batches) {
  const int64_t batches = Scaled(base_batches, options_.scale, 1);
  r.ops = batches * batch;
  r.latencies_ns.assign(r.ops, 0);
  const int64_t started_before = started_.load();
  int64_t pongs = 0, downs = 0;
  std::vector<caf::actor> actors;
  actors.reserve(batch);
  std::vector<int64_t> start_ns(batch);
  std::vector<bool> answered(batch);
  bool stuck = false;
  const absl::Time t0 = absl::Now();
  for (int64_t b = 0; b < batches && !stuck; ++b) {
    actors.clear();
    std::fill(answered.begin(), answered.end(), false);
    for (int i = 0; i < batch; ++i) {
      start_ns[i] = absl::GetCurrentTimeNanos();
      caf::actor a = system_.spawn(Pinger, &started_);
      self_->monitor(a);
      self_->send(a, PingAtom::value, int64_t{i});
      actors.push_back(std::move(a));
    }
    for (int got = 0; got < batch && !stuck;) {
      self_->receive(
          [&](PongAtom, int64_t seq) {
            if (seq < 0 || seq >= batch || answered[seq]) {
              ++r.errors;
              return;
            }
            answered[seq] = true;
            ++got;
            ++pongs;
            r.latencies_ns[b * batch + seq] =
                absl::GetCurrentTimeNanos() - start_ns[seq];
          },
          caf::after(kStuck) >> [&] { stuck = true; });
    }
    for (const caf::actor& a : actors) {
      self_->send_exit(a, caf::exit_reason::user_shutdown);
    }
    for (int gone = 0; gone < batch && !stuck;) {
      self_->receive(
          [&](caf::down_msg& down) {
            ++gone;
            ++downs;
            if (down.reason != caf::exit_reason::user_shutdown) ++r.errors;
          },
          caf::after(kStuck) >> [&] { stuck = true; });
    }
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = true;
  const int64_t started = started_.load() - started_before;
  if (stuck) {
    Fail(r, absl::StrCat("no reply or down message for ",
                         absl::FormatDuration(absl::FromChrono(kStuck)), " (",
                         pongs, " pongs, ", downs, " downs)"));
  }
  if (started != r.ops) {
    Fail(r, absl::StrCat(started, " actors started, expected ", r.ops));
  }
  if (pongs != r.ops) {
    Fail(r, absl::StrCat(pongs, " first pings answered, expected ", r.ops));
  }
  if (downs != r.ops) {
    Fail(r, absl::StrCat(downs, " down messages, expected ", r.ops));
  }
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " unexpected pongs or exit reasons"));
  }
}

// One-way tells into one counter from outside the actor system, then its
// tally. Every 16th tell carries its send time, as granary-bench's do.
void CafScenarios::OneWay(ScenarioResult& r) {
  r.ops = Scaled(10000, options_.scale, 100);
  Tally tally;
  std::string error;
  if (!ReadTally(self_, oneway_target_, /*reset=*/true, &tally, &error)) {
    Fail(r, absl::StrCat("could not reset the counter: ", error));
    return;
  }
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    const int64_t sent_ns = i % 16 == 0 ? absl::GetCurrentTimeNanos() : 0;
    caf::anon_send(oneway_target_, TellAtom::value, int64_t{1}, sent_ns);
  }
  const bool read =
      ReadTally(self_, oneway_target_, /*reset=*/true, &tally, &error);
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = true;
  if (!read) {
    Fail(r, absl::StrCat("count failed: ", error));
    return;
  }
  r.p50_ns = tally.p50_ns;
  r.p99_ns = tally.p99_ns;
  if (tally.count != r.ops || tally.tells != r.ops) {
    Fail(r, absl::StrCat("counter counted ", tally.count, " in ", tally.tells,
                         " tells, expected ", r.ops));
  }
}

// One-way tells round-robin over 1,000 counters, then every counter's tally
// (asked of all at once). p50 is the median of the counters' p50s, p99 the
// worst p99, as granary-bench reports them.
void CafScenarios::OneWaySpread(ScenarioResult& r) {
  r.ops = Scaled(20000, options_.scale, kSpreadTargets);
  // Asks every counter for its tally at once and gathers the replies.
  auto tally_all = [&](std::vector<Tally>* tallies) -> bool {
    for (const caf::actor& t : spread_targets_) {
      self_->send(t, CountAtom::value, true);
    }
    bool stuck = false;
    for (int got = 0; got < kSpreadTargets && !stuck;) {
      self_->receive(
          [&](int64_t count, int64_t tells, int64_t p50, int64_t p99) {
            ++got;
            if (tallies != nullptr) {
              tallies->push_back(Tally{count, tells, p50, p99});
            }
          },
          caf::after(kStuck) >> [&] { stuck = true; });
    }
    return !stuck;
  };
  if (!tally_all(nullptr)) {
    Fail(r, "could not reset the counters");
    return;
  }
  std::vector<Tally> tallies;
  tallies.reserve(kSpreadTargets);
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    const int64_t sent_ns = i % 16 == 0 ? absl::GetCurrentTimeNanos() : 0;
    caf::anon_send(spread_targets_[i % kSpreadTargets], TellAtom::value,
                   int64_t{1}, sent_ns);
  }
  const bool read = tally_all(&tallies);
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = true;
  if (!read) {
    Fail(r, absl::StrCat("only ", tallies.size(), " of ", kSpreadTargets,
                         " counters answered"));
    return;
  }
  int64_t counted = 0, tells = 0;
  std::vector<int64_t> p50s;
  for (const Tally& t : tallies) {
    counted += t.count;
    tells += t.tells;
    if (t.p50_ns > 0) p50s.push_back(t.p50_ns);  // sampled
    r.p99_ns = std::max(r.p99_ns, t.p99_ns);
  }
  r.p50_ns = NearestRank(p50s, 0.5);
  if (counted != r.ops || tells != r.ops) {
    Fail(r, absl::StrCat("counters counted ", counted, " in ", tells,
                         " tells, expected ", r.ops));
  }
}

// Sequential request/response from outside the actor system.
void CafScenarios::Ask(ScenarioResult& r) {
  r.ops = Scaled(5000, options_.scale, 100);
  r.concurrency = 1;
  r.latencies_ns.reserve(r.ops);
  std::string first_error;
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    const int64_t start = absl::GetCurrentTimeNanos();
    self_->request(ask_target_, caf::infinite, PingAtom::value, i)
        .receive(
            [&](PongAtom, int64_t seq) {
              if (seq != i) ++r.errors;
            },
            [&](caf::error& e) {
              ++r.errors;
              if (first_error.empty()) first_error = caf::to_string(e);
            });
    r.latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = r.errors == 0;
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " pings failed or mismatched",
                         first_error.empty() ? "" : ", first: ", first_error));
  }
}

// Sequential requests to the head of a chain of depth + 1 links; each link
// awaits the next one's reply (request(...).then) before it answers.
void CafScenarios::Chain(ScenarioResult& r) {
  r.ops = Scaled(2000, options_.scale, 20);
  r.latencies_ns.reserve(r.ops);
  const int32_t depth = options_.depth;
  std::string first_error;
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    const int64_t start = absl::GetCurrentTimeNanos();
    self_->request(chain_head_, caf::infinite, ChainAtom::value, depth)
        .receive(
            [&](int32_t reached) {
              if (reached != depth) ++r.errors;
            },
            [&](caf::error& e) {
              ++r.errors;
              if (first_error.empty()) first_error = caf::to_string(e);
            });
    r.latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = r.errors == 0;
  if (r.errors > 0) {
    Fail(r,
         absl::StrCat(r.errors, " chains failed or fell short of depth ", depth,
                      first_error.empty() ? "" : ", first: ", first_error));
  }
}

// Volleys of 1,000 one-way balls between two players; a sample is a
// volley's time divided by its exchanges. Verified by the balls the two
// players received.
void CafScenarios::PingPong(ScenarioResult& r) {
  const int64_t volleys = Scaled(10, options_.scale, 1);
  r.ops = volleys * kVolley;
  r.latencies_ns.reserve(volleys);
  int64_t balls_a = 0, balls_b = 0;
  std::string error;
  if (!ReadBalls(self_, player_a_, /*reset=*/true, &balls_a, &error) ||
      !ReadBalls(self_, player_b_, /*reset=*/true, &balls_b, &error)) {
    Fail(r, absl::StrCat("could not reset the players: ", error));
    return;
  }
  std::string first_error;
  const absl::Time t0 = absl::Now();
  for (int64_t v = 0; v < volleys; ++v) {
    const int64_t start = absl::GetCurrentTimeNanos();
    self_
        ->request(player_a_, caf::infinite, VolleyAtom::value, player_b_,
                  kVolley)
        .receive(
            [&](int64_t exchanges) {
              if (exchanges != kVolley) ++r.errors;
            },
            [&](caf::error& e) {
              ++r.errors;
              if (first_error.empty()) first_error = caf::to_string(e);
            });
    r.latencies_ns.push_back((absl::GetCurrentTimeNanos() - start) / kVolley);
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = true;
  if (!ReadBalls(self_, player_a_, /*reset=*/true, &balls_a, &error) ||
      !ReadBalls(self_, player_b_, /*reset=*/true, &balls_b, &error)) {
    Fail(r, absl::StrCat("could not read the players' counts: ", error));
    return;
  }
  if (balls_a + balls_b != r.ops) {
    Fail(r, absl::StrCat("players received ", balls_a + balls_b,
                         " balls, expected ", r.ops));
  }
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " volleys failed",
                         first_error.empty() ? "" : ", first: ", first_error));
  }
}

// Sequential fan-outs: the head pings --fanout leaves at once and answers
// with the number of replies it gathered.
void CafScenarios::FanOut(ScenarioResult& r) {
  r.ops = Scaled(1000, options_.scale, 10);
  r.latencies_ns.reserve(r.ops);
  const int32_t width = options_.fanout;
  std::string first_error;
  const absl::Time t0 = absl::Now();
  for (int64_t i = 0; i < r.ops; ++i) {
    const int64_t start = absl::GetCurrentTimeNanos();
    self_->request(fanout_head_, caf::infinite, FanOutAtom::value, width)
        .receive(
            [&](int32_t replies) {
              if (replies != width) ++r.errors;
            },
            [&](caf::error& e) {
              ++r.errors;
              if (first_error.empty()) first_error = caf::to_string(e);
            });
    r.latencies_ns.push_back(absl::GetCurrentTimeNanos() - start);
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  r.verified = r.errors == 0;
  if (r.errors > 0) {
    Fail(r, absl::StrCat(r.errors, " fan-outs failed or gathered fewer than ",
                         width, " replies",
                         first_error.empty() ? "" : ", first: ", first_error));
  }
}

}  // namespace granary::bench::compare
