// Grains in a dev cluster of three granary-silo processes on 127.0.0.1: each
// grain has exactly one activation, whichever gateway its callers use, and
// when a silo is killed with SIGKILL its grains come back on the survivors
// while the survivors' grains keep their activations, with no grain ever
// answering from two live activations and no acknowledged state write lost
// (the state lives with the primary, which serves it to the others).
#include <algorithm>
#include <atomic>
#include <barrier>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "core/detach.h"
#include "examples/ping.granary.h"
#include "tests/cluster_fixture.h"
#include "tests/cluster_load.h"

namespace granary::testing {
namespace {

TEST_F(ClusterRoutingTest, EveryGrainHasOneActivationWhicheverGatewayIsUsed) {
  ExpectEveryGrainOnOneActivation();
}

// Alarm is placed at random: each gateway that receives the first call for
// a new grain picks a silo of its own, so calls arriving through the three
// gateways at the same moment make up to three silos try to activate the
// grain at once. The directory lets exactly one win: every answer comes from
// one activation.
TEST_F(ClusterRoutingTest,
       SilosRacingToActivateARandomlyPlacedGrainAgreeOnOne) {
  const int kRaced = Scaled(1500);
  const int kCallers = static_cast<int>(clients_.size());
  // answers[c][g]: "silo/activation id" of grain g through client c.
  std::vector<std::vector<Where>> answers(
      clients_.size(), std::vector<Where>(static_cast<size_t>(kRaced)));
  std::barrier start_together(kCallers);
  std::vector<std::thread> threads;
  for (int c = 0; c < kCallers; ++c) {
    threads.emplace_back([&, c] {
      for (int g = 0; g < kRaced; ++g) {
        start_together.arrive_and_wait();  // the same grain, all gateways
        absl::StatusOr<examples::AlarmState> s =
            clients_[static_cast<size_t>(c)]
                ->Get<examples::AlarmRef>(absl::StrCat("race-", g))
                .Get(examples::GetAlarmRequest())
                .Get();
        if (!s.ok()) {
          ADD_FAILURE() << "race-" << g << " via " << gateways_[c] << ": "
                        << s.status();
          continue;
        }
        answers[static_cast<size_t>(c)][static_cast<size_t>(g)] =
            absl::StrCat(s->silo(), "/", s->activation_id());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::map<std::string, int> per_silo;
  int split = 0;
  for (int g = 0; g < kRaced; ++g) {
    std::set<Where> seen;
    for (const auto& row : answers) seen.insert(row[static_cast<size_t>(g)]);
    if (seen.size() != 1 && ++split <= 5) {
      ADD_FAILURE() << "race-" << g << " answered from " << seen.size()
                    << " activations: " << absl::StrJoin(seen, ", ");
    }
    ++per_silo[SiloOf(answers[0][static_cast<size_t>(g)])];
  }
  EXPECT_EQ(split, 0) << "grains with more than one activation";
  // Placed at random, the grains live all over the cluster (so the gateways
  // did pick different silos for them).
  EXPECT_EQ(per_silo.size(), 3u);
  for (const auto& [silo, n] : per_silo) {
    std::cout << silo << " hosts " << n << " raced grains\n";
  }
}

TEST_F(ClusterRoutingTest, AKilledSilosGrainsMoveAndNoOtherGrainIsDisturbed) {
  const int kCrashGrains = Scaled(3000);
  const std::vector<Where> home = AskAll(kCrashGrains)[0];
  // Silo 2 is killed; calls go through gateways 0 and 1.
  std::string victim;
  for (const Where& w : home) {
    if (w.rfind(silo_addresses_[2] + "@", 0) == 0) victim = SiloOf(w);
  }
  ASSERT_FALSE(victim.empty());
  clients_[2]->Close();
  clients_[2] = nullptr;
  const std::vector<Client*> survivors = {clients_[0].get(), clients_[1].get()};

  // Accounts whose state lives with the primary; some are on the victim.
  DepositLoad deposits(survivors, Scaled(200));
  ASSERT_TRUE(deposits.Seed(10).ok());
  deposits.Start();
  // Steady load through the survivors' gateways, recording every answer.
  WhereLoad where(
      survivors,
      [&](size_t c, int i) {
        return (i * 7 + static_cast<int>(c) * 13) % kCrashGrains;
      },
      absl::Seconds(10));
  ASSERT_TRUE(
      Eventually([&] { return where.calls() >= 200; }));  // before the kill
  const absl::Time killed = absl::Now();
  silos_[2]->Signal(SIGKILL);
  EXPECT_EQ(silos_[2]->Wait(), 128 + SIGKILL);

  // Every grain answers again, from a live silo.
  std::vector<Where> after(static_cast<size_t>(kCrashGrains));
  ASSERT_TRUE(EveryGrainAnswersOffTheVictim(survivors, victim, &after));
  const absl::Duration recovered = absl::Now() - killed;
  where.Stop();
  deposits.Stop();
  std::cout << "SIGKILL to every grain answering: "
            << absl::FormatDuration(recovered) << "; load calls "
            << where.calls() << ", failed " << where.errors().size() << "\n";
  ExpectOnlyTheVictimsGrainsMoved(home, after, where.seen(), victim);
  // No acknowledged deposit was lost, wherever its account lives now.
  deposits.ExpectBalances(*clients_[0]);
}

// A silo cut off from the cluster (here: frozen with SIGSTOP, so it can
// neither answer probes nor read the table) is declared dead and its grains
// move. When it runs again, the calls that waited in its gateway meanwhile
// must not reach its old activations: its membership lease ran out, so it
// runs no grain code until the table confirms it, and the table says it is
// dead, so it exits (status 3).
TEST_F(ClusterRoutingTest, ASiloCutOffIsDeclaredDeadAndNeverAnswersAgain) {
  const int kCutGrains = Scaled(1500);
  const std::vector<std::vector<Where>> before = AskAll(kCutGrains);
  const std::string victim_prefix = silo_addresses_[2] + "@";
  const std::vector<int> victims = GrainsOn(before[0], victim_prefix);
  ASSERT_FALSE(victims.empty());
  silos_[2]->Signal(SIGSTOP);
  // kill() returns before every thread has stopped.
  ASSERT_TRUE(
      Eventually([&] { return silos_[2]->Stopped(); }, absl::Seconds(10)));

  // Calls to its grains through its own gateway wait (it is frozen).
  Mutex mu;
  std::map<int, std::set<Where>> answers;  // from now on
  std::atomic<int> waited_done{0};
  std::vector<std::thread> waiting;
  for (int t = 0; t < 4; ++t) {
    waiting.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < victims.size() && i < 200;
           i += 4) {
        absl::StatusOr<Where> w =
            AskWhere(*clients_[2], Key(victims[i]), absl::Seconds(30));
        waited_done.fetch_add(1);
        if (w.ok()) {
          MutexLock lock(&mu);
          answers[victims[i]].insert(*w);
        }
      }
    });
  }
  // The others declare it dead and its grains answer from them.
  std::string last_error;
  ASSERT_TRUE(Eventually(
      [&] {
        for (int g : victims) {
          absl::StatusOr<Where> w =
              AskWhere(*clients_[g % 2], Key(g), absl::Seconds(2));
          if (!w.ok() || w->rfind(victim_prefix, 0) == 0) {
            last_error = w.ok() ? *w : w.status().ToString();
            return false;
          }
          MutexLock lock(&mu);
          answers[g].insert(*w);
        }
        return true;
      },
      absl::Seconds(60)))
      << last_error << "\n"
      << silos_[0]->Stderr() << "\n"
      << silos_[1]->Stderr();
  // It runs again: it must exit without answering from an old activation.
  silos_[2]->Signal(SIGCONT);
  EXPECT_EQ(silos_[2]->Wait(), 3) << "a silo declared dead exits with 3";
  for (std::thread& t : waiting) t.join();
  MutexLock lock(&mu);
  for (const auto& [g, seen] : answers) {
    for (const Where& w : seen) {
      EXPECT_NE(w.rfind(victim_prefix, 0), 0u)
          << Key(g) << " answered from the silo declared dead: " << w;
    }
    EXPECT_EQ(seen.size(), 1u) << Key(g);
  }
  std::cout << "victim grains: " << victims.size()
            << ", calls that waited in its gateway: " << waited_done << "\n";
}

TEST_F(ClusterRoutingTest, AClientGivenOneGatewayLearnsTheOthers) {
  ClientOptions options;
  options.gateways = {gateways_[1]};
  options.gateway_refresh_period = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(Eventually(
      [&] {
        return (*c)->gateways().size() == 3 && (*c)->connected_gateways() == 3;
      },
      absl::Seconds(20)));
  std::vector<std::string> known = (*c)->gateways();
  std::sort(known.begin(), known.end());
  std::vector<std::string> expected = gateways_;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(known, expected);
  // It keeps working when the gateway it was given goes away.
  silos_[1]->Signal(SIGTERM);
  EXPECT_EQ(silos_[1]->Wait(), 0);
  for (int g = 0; g < 50; ++g) {
    absl::StatusOr<Where> w = AskWhere(**c, Key(g));
    EXPECT_TRUE(w.ok()) << w.status() << " (the stopped silo: gateway "
                        << gateways_[1] << ", silo " << silo_addresses_[1]
                        << ")";
  }
  (*c)->Close();
}

TEST_F(ClusterRoutingTest, GracefulLeaveAndJoinUnderLoadFailNoCall) {
  const int kLoadGrains = Scaled(2000);
  (void)AskAll(kLoadGrains);  // placed over the three silos
  // One more client that knows every gateway, including the leaving one.
  ClientOptions options;
  options.gateways = gateways_;
  absl::StatusOr<std::unique_ptr<Client>> all = Client::Connect(options);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_TRUE((*all)->WaitForConnected(absl::Seconds(10)).ok());
  // Mostly grains that exist, some new ones (placed during the changes).
  std::atomic<int> fresh{0};
  WhereLoad load(
      {clients_[0].get(), clients_[1].get(), all->get()}, [&](size_t c, int i) {
        return i % 10 == 0 ? kLoadGrains + fresh.fetch_add(1)
                           : (i * 7 + static_cast<int>(c) * 11) % kLoadGrains;
      });
  ASSERT_TRUE(Eventually([&] { return load.calls() >= 300; }));
  // Leave: SIGTERM, and the silo exits 0.
  const std::string leaving = silo_addresses_[2] + "@";
  silos_[2]->Signal(SIGTERM);
  EXPECT_EQ(silos_[2]->Wait(), 0);
  clients_[2]->Close();
  // Join: a fourth silo, under the same load.
  silos_.push_back(std::make_unique<SiloProcess>(
      DevArgs(TempDir("route-3"), silo_addresses_[0])));
  const std::string ready = silos_.back()->ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  const std::string joined = Field(ready, "silo") + "@";
  // The join takes effect under the load: new grains are placed on the
  // joined silo (hash placement over the new ring) and answer from there.
  EXPECT_TRUE(Eventually([&] { return load.AnswersFrom(joined) >= 20; }))
      << "no grain answered from the joined silo " << joined;
  const int calls_at_join = load.calls();
  // And the load goes on a while with the four-silo ring.
  EXPECT_TRUE(Eventually([&] { return load.calls() >= calls_at_join + 300; }));
  load.Stop();
  (*all)->Close();

  const std::vector<std::string> errors = load.errors();
  std::cout << "calls: " << load.calls() << ", new grains: " << fresh
            << ", failed: " << errors.size() << "\n";
  for (size_t i = 0; i < errors.size() && i < 10; ++i) {
    ADD_FAILURE() << errors[i] << " (leaving silo " << leaving << " gateway "
                  << gateways_[2] << ")";
  }
  EXPECT_TRUE(errors.empty());
  for (const auto& [g, answers] : load.seen()) {
    std::set<Where> others;
    for (const Where& w : answers) {
      if (w.rfind(leaving, 0) != 0) others.insert(w);
    }
    // A grain of the leaving silo moved once; no other grain moved.
    EXPECT_LE(others.size(), 1u) << Key(g);
  }
  const int on_joined = load.AnswersFrom(joined);
  EXPECT_GT(on_joined, 0) << "the joined silo hosts nothing";
  std::cout << "answers from the joined silo: " << on_joined << "\n";
}

// A graceful leave while the leaving silo's grains have calls queued deep
// in their mailboxes (each call keeps its grain busy 2 ms, so a grain's
// queue is about 100 ms of work): every queued call is answered, by the
// activation before it deactivates or by the grain's new activation on
// another silo; none fails. Half the calls come through the leaving silo's
// own gateway, half through another silo's (passed on over the silo link).
TEST_F(ClusterRoutingTest, AGracefulLeaveAnswersEveryCallQueuedInItsGrains) {
  constexpr int kGrains = 8, kCallsPerGrain = 50;
  const std::string leaving = silo_addresses_[2] + "@";
  std::vector<std::string> keys;
  for (int g = 0; static_cast<int>(keys.size()) < kGrains && g < 1000; ++g) {
    const std::string key = absl::StrCat("deep-", g);
    absl::StatusOr<Where> w = AskWhere(*clients_[0], key);
    ASSERT_TRUE(w.ok()) << w.status();
    if (w->rfind(leaving, 0) == 0) keys.push_back(key);
  }
  ASSERT_EQ(static_cast<int>(keys.size()), kGrains);

  Mutex mu;
  int answered = 0, from_leaving = 0;
  std::vector<std::string> failures;
  CondVar all_done;
  bench::WhereRequest busy;
  busy.set_work_ns(2'000'000);
  CallOptions options;
  options.timeout = absl::Seconds(60);
  for (int i = 0; i < kCallsPerGrain; ++i) {
    for (int g = 0; g < kGrains; ++g) {
      Client& via = *clients_[(i + g) % 2 == 0 ? 0 : 2];
      Detach(via.Get<bench::BenchGrainRef>(keys[static_cast<size_t>(g)])
                 .Where(busy, options),
             [&, g](absl::StatusOr<bench::WhereReply> r) {
               MutexLock lock(&mu);
               ++answered;
               if (!r.ok()) {
                 failures.push_back(absl::StrCat(keys[static_cast<size_t>(g)],
                                                 ": ", r.status().ToString()));
               } else if (absl::StartsWith(r->silo(), leaving)) {
                 ++from_leaving;
               }
               all_done.SignalAll();
             });
    }
  }
  constexpr int kCalls = kGrains * kCallsPerGrain;
  {
    // The leave begins once the grains are busy: the queues are still
    // nearly full (hundreds of milliseconds of work).
    MutexLock lock(&mu);
    while (answered < kGrains) all_done.Wait(&mu);
  }
  int at_signal;
  {
    MutexLock lock(&mu);
    at_signal = answered;
  }
  silos_[2]->Signal(SIGTERM);
  EXPECT_EQ(silos_[2]->Wait(), 0);
  {
    MutexLock lock(&mu);
    const absl::Time until = absl::Now() + absl::Seconds(120);
    while (answered < kCalls && absl::Now() < until) {
      all_done.WaitWithDeadline(&mu, until);
    }
    std::cout << "calls: " << kCalls
              << ", answered before the leave: " << at_signal
              << ", by the leaving silo: " << from_leaving
              << ", elsewhere: " << answered - from_leaving - failures.size()
              << ", failed: " << failures.size() << "\n";
    EXPECT_EQ(answered, kCalls) << "calls never answered";
    EXPECT_LT(at_signal, kCalls / 2)
        << "the queues were not deep when the leave began";
    for (size_t i = 0; i < failures.size() && i < 10; ++i) {
      ADD_FAILURE() << failures[i];
    }
    EXPECT_TRUE(failures.empty());
  }
}

// One-hop calls: a client that has every gateway sends a grain's calls to
// the gateway of the grain's silo once a reply told it where that is; with
// the location cache off, about two calls in three are passed on (grains
// are spread over the three silos by hash, calls over the gateways by
// another hash).
TEST_F(ClusterRoutingTest, AClientSendsAGrainsCallsToItsSiloAfterOneReply) {
  const int kHopGrains = Scaled(600);
  auto connect = [&](int cache) {
    ClientOptions options;
    options.gateways = gateways_;
    options.gateway_refresh_period = absl::ZeroDuration();
    options.location_cache_size = cache;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) {
      EXPECT_TRUE(Eventually([&] { return (*c)->connected_gateways() == 3; }));
    }
    return c.ok() ? *std::move(c) : nullptr;
  };
  // Asks every grain; the number of calls the silos passed on meanwhile.
  auto pass = [&](Client& client, const std::string& prefix,
                  std::vector<Where>* where) {
    const int64_t before = Forwarded(https_);
    where->assign(static_cast<size_t>(kHopGrains), "");
    for (int g = 0; g < kHopGrains; ++g) {
      absl::StatusOr<Where> w = AskWhere(client, prefix + Key(g));
      EXPECT_TRUE(w.ok()) << w.status();
      if (w.ok()) (*where)[static_cast<size_t>(g)] = *w;
    }
    return Forwarded(https_) - before;
  };
  std::unique_ptr<Client> cached = connect(100000);
  std::unique_ptr<Client> uncached = connect(0);
  ASSERT_NE(cached, nullptr);
  ASSERT_NE(uncached, nullptr);
  std::vector<Where> first, second, third, fourth;
  const int64_t cold = pass(*cached, "hop-", &first);
  const int64_t warm = pass(*cached, "hop-", &second);
  const int64_t off_first = pass(*uncached, "nohop-", &third);
  const int64_t off_again = pass(*uncached, "nohop-", &fourth);
  ASSERT_GE(cold, 0) << "no granary_calls_forwarded_total in /metrics";
  EXPECT_EQ(first, second);  // the same activations
  EXPECT_EQ(third, fourth);
  // A client's first call reaches the grain's silo about one time in
  // three.
  EXPECT_GT(cold, kHopGrains / 3);
  EXPECT_GT(off_again, kHopGrains / 3);
  EXPECT_LE(warm, std::max(1, kHopGrains / 20))
      << "calls still passed on: " << warm;
  std::cout << "calls passed on, of " << kHopGrains << ": first pass " << cold
            << ", second " << warm << "; cache off: " << off_first << ", "
            << off_again << "\n";
  cached->Close();
  uncached->Close();
}

// The silos write JSON log lines, as a log pipeline would collect them.
class TracedClusterTest : public ClusterRoutingTest {
 protected:
  void SetUp() override {
    extra_args_ = {"--log_format=json", "--log_level=info"};
    ClusterRoutingTest::SetUp();
  }
};

TEST_F(TracedClusterTest, ContextAndTraceFollowAChainAcrossThreeSilos) {
  // One Ping grain on each silo (placed at random on its first call).
  std::map<std::string, std::string> key_on;  // silo name -> grain key
  for (int i = 0; key_on.size() < 3 && i < 1000; ++i) {
    const std::string key = absl::StrCat("relay-", i);
    absl::StatusOr<examples::PingReply> where =
        clients_[0]->Get<examples::PingRef>(key).Ping({}).Get();
    ASSERT_TRUE(where.ok()) << where.status();
    key_on.emplace(where->silo(), key);
  }
  ASSERT_EQ(key_on.size(), 3u);
  std::vector<std::string> keys;
  for (const auto& [silo, key] : key_on) keys.push_back(key);

  const std::string trace_id = "0af7651916cd43dd8448eb211c80319c";
  CallOptions options;
  options.context = {{"tenant", "acme"}};
  options.traceparent = absl::StrCat("00-", trace_id, "-b7ad6b7169203331-01");
  examples::RelayRequest request;
  request.add_path(keys[1]);
  request.add_path(keys[2]);
  absl::StatusOr<examples::RelayReply> reply =
      clients_[2]
          ->Get<examples::PingRef>(keys[0])
          .Relay(request, options)
          .Get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->hops_size(), 3);
  std::set<std::string> silos_seen;
  for (const std::string& hop : reply->hops()) {
    silos_seen.insert(hop.substr(hop.find('@') + 1));
  }
  EXPECT_EQ(silos_seen.size(), 3u) << absl::StrJoin(reply->hops(), " ");
  EXPECT_THAT(reply->context(),
              ::testing::ElementsAre("relay-hops=3", "tenant=acme"));
  EXPECT_EQ(reply->trace_id(), trace_id);

  // Every silo the chain touched logged its hop as a JSON line naming the
  // trace. (Log lines reach the test through a pipe: wait for them.)
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string line_start =
        absl::StrCat("\"trace_id\":\"", trace_id,
                     "\",\"grain\":\"granary.examples.Ping/", keys[i], "\"");
    bool found = false;
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!found && absl::Now() < give_up) {
      for (auto& silo : silos_) {
        found = found || silo->Stderr().find(line_start) != std::string::npos;
      }
      if (!found) absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_TRUE(found) << "no JSON log line starting " << line_start;
  }
  // ... and each on its own silo: three silos logged the trace.
  int silos_logging = 0;
  for (auto& silo : silos_) {
    if (silo->Stderr().find(absl::StrCat("\"trace_id\":\"", trace_id)) !=
        std::string::npos) {
      ++silos_logging;
    }
  }
  EXPECT_EQ(silos_logging, 3);
}

}  // namespace
}  // namespace granary::testing
