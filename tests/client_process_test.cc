// Process-level tests of the client side against the stock `granary-silo`:
// the `granary` CLI (calls, types, status, bad input), the C++ SDK across a
// silo killed mid-call and restarted, graceful shutdown under load, and
// durable reminders (the Alarm example) ticking again after kill -9.
#include <signal.h>

#include <atomic>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "core/detach.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "examples/bank.granary.h"
#include "examples/bench.granary.h"
#include "examples/counter.granary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"

using ::granary::matchers::StatusIs;

namespace granary::testing {
namespace {

using ::granary::examples::AddRequest;
using ::granary::examples::CounterRef;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(CliProcessTest, CallsAnyGrainWithJsonAndDescribesTheSilo) {
  SiloProcess silo(AnyPorts(TempDir("cli")));
  const std::string ready = silo.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  const std::string gw = Field(ready, "gateway");

  ToolRun r = Cli(gw, {"call", "Counter/alice", "Add", R"({"amount": 5})"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"value\":\"5\"}\n");
  r = Cli(gw, {"call", "granary.examples.Counter/alice", "Add",
               R"({"amount": 2})"});
  EXPECT_EQ(r.out, "{\"value\":\"7\"}\n");
  r = Cli(gw, {"call", "Counter/alice", "Bump", R"({"amount": 1})"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{}\n");
  r = Cli(gw, {"call", "Counter/alice", "Get"});  // JSON defaults to {}
  EXPECT_EQ(r.out, "{\"value\":\"8\"}\n");
  // Keys may contain slashes; the type is what precedes the first one.
  r = Cli(gw, {"call", "Counter/a/b", "Get"});
  EXPECT_EQ(r.out, "{\"value\":\"0\"}\n");
  // A grain type the CLI was never built with (its types come by reflection).
  r = Cli(gw, {"call", "BenchGrain/x", "Ping", R"({"seq": "42"})"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"seq\":\"42\"}\n");

  r = Cli(gw, {"types"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("granary.examples.Counter\n"));
  EXPECT_THAT(r.out, HasSubstr("  Add(granary.examples.AddRequest) returns "
                               "(granary.examples.CounterValue)\n"));
  EXPECT_THAT(r.out, HasSubstr("Bump(granary.examples.AddRequest) returns "
                               "(google.protobuf.Empty)  [one_way]"));
  EXPECT_THAT(r.out, HasSubstr("granary.bench.BenchGrain\n"));

  r = Cli(gw, {"status"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(Field(ready, "silo")));  // the silo's name
  EXPECT_THAT(r.out, HasSubstr("gateway      " + gw));
  EXPECT_THAT(r.out, HasSubstr("uptime"));
  EXPECT_THAT(r.out, HasSubstr("activations  3"));  // alice, a/b and x

  // Request context and a trace, as gRPC metadata the grain reads.
  r = Cli(gw, {"--context=tenant=acme,user=ann",
               "--traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-"
               "00f067aa0ba902b7-01",
               "call", "Ping/p", "Relay", R"({"path": ["q"]})"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(
      r.out,
      HasSubstr(R"("context":["relay-hops=2","tenant=acme","user=ann"])"));
  EXPECT_THAT(r.out,
              HasSubstr(R"("traceId":"4bf92f3577b34da6a3ce929d0e0e4736")"));
  // A server-streaming method: each message printed as one line.
  r = Cli(gw,
          {"call", "Chat/room", "Post", R"({"author": "ann", "text": "hi"})"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("{\"seq\":\""));  // a clock
  r = Cli(gw, {"--watch_for=1s", "call", "Chat/room", "Watch"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(R"("author":"ann","text":"hi")"));
  r = Cli(gw, {"types"});
  EXPECT_THAT(r.out, HasSubstr("Watch(granary.examples.WatchRequest) returns "
                               "(stream granary.examples.ChatMessage)"));
  silo.Signal(SIGTERM);
  EXPECT_EQ(silo.Wait(), 0);
}

TEST(CliProcessTest, BadInputGetsAStatusAndANonZeroExit) {
  SiloProcess silo(AnyPorts(TempDir("cli-bad")));
  const std::string ready = silo.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  const std::string gw = Field(ready, "gateway");
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string err;
  };
  for (const Case& c : std::vector<Case>{
           {{"call", "Counter/a", "Add", R"({"amount": )"},
            1,
            "INVALID_ARGUMENT: request is not valid JSON"},
           {{"call", "Counter/a", "Add", R"({"nope": 1})"},
            1,
            "INVALID_ARGUMENT"},
           {{"call", "Counter/a", "Add", R"({"amount": "many"})"},
            1,
            "INVALID_ARGUMENT"},
           {{"call", "Nope/a", "Add"},
            1,
            "UNIMPLEMENTED: unknown grain type 'Nope'"},
           {{"call", "Counter/a", "Nope"},
            1,
            "UNIMPLEMENTED: grain type granary.examples.Counter has no method "
            "'Nope'"},
           {{"call", "Counter/", "Get"}, 1, "INVALID_ARGUMENT"},
           {{"call", "Counter/" + std::string(5000, 'k'), "Get"},
            1,
            "INVALID_ARGUMENT"},
           {{"call", "Counter", "Get"}, 1, "is not TYPE/KEY"},
           {{"call", "Counter/a"}, 2, "call takes TYPE/KEY METHOD [JSON]"},
           {{"frob"}, 2, "unknown command 'frob'"},
           {{}, 2, "no command given"},
           {{"--timeout=soon", "status"}, 1, "timeout"},
           {{"--tls_ca=/nonexistent/ca.pem", "status"}, 2, "cannot be read"},
           {{"--tls_cert=/etc/passwd", "status"}, 2, "needs its key"},
           {{"--token_file=/nonexistent/token", "status"}, 2, "--token_file"},
           {{"--tls_ca=/etc/passwd", "status"}, 2, "no PEM certificate"},
           {{"--context=tenant", "call", "Ping/a", "Relay"},
            2,
            "is not KEY=VALUE"},
           {{"--context=Tenant=x", "call", "Ping/a", "Relay"},
            2,
            "may hold only"},
           {{"--context=a=1,a=2", "call", "Ping/a", "Relay"}, 2, "given twice"},
           {{"--traceparent=00-nope", "call", "Ping/a", "Relay"},
            2,
            "is not a W3C traceparent"},
           {{"--watch_for=0s", "call", "Chat/a", "Watch"},
            2,
            "--watch_for must be positive"},
           {{"call", "Chat/a", "Watch", R"({"afterSeq": "soon"})"},
            1,
            "INVALID_ARGUMENT"},
           {{"call", "Chat/", "Watch"}, 1, "INVALID_ARGUMENT"},
       }) {
    ToolRun r = Cli(gw, c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.err << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.err));
    EXPECT_EQ(r.out, "") << c.err;
  }
  // The silo served all of that and still answers.
  ToolRun ok = Cli(gw, {"call", "Counter/a", "Get"});
  EXPECT_EQ(ok.out, "{\"value\":\"0\"}\n");
  silo.Signal(SIGTERM);
  EXPECT_EQ(silo.Wait(), 0);
  // No silo: UNAVAILABLE, promptly.
  ToolRun gone = Cli(gw, {"status"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, StartsWith("granary: UNAVAILABLE"));
}

// Outcomes of detached calls, by code.
struct Tally {
  Mutex mu;
  int64_t ok ABSL_GUARDED_BY(mu) = 0;
  int64_t unavailable ABSL_GUARDED_BY(mu) = 0;
  int64_t other ABSL_GUARDED_BY(mu) = 0;
  std::string other_example ABSL_GUARDED_BY(mu);
  void Add(const absl::Status& s) {
    MutexLock lock(&mu);
    if (s.ok()) {
      ++ok;
    } else if (s.code() == absl::StatusCode::kUnavailable) {
      ++unavailable;
    } else {
      ++other;
      other_example = s.ToString();
    }
  }
  template <typename Pred>
  bool WaitUntil(Pred pred) {
    MutexLock lock(&mu);
    return mu.AwaitWithTimeout(pred, absl::Seconds(60));
  }
};

TEST(ClientProcessTest,
     CallsFailPromptlyWhenTheSiloIsKilledAndWorkAfterRestart) {
  const std::string dir = TempDir("sdk-kill");
  auto silo = std::make_unique<SiloProcess>(AnyPorts(dir));
  const std::string ready = silo->ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  const std::string gw = Field(ready, "gateway");

  ClientOptions options;
  options.gateways = {gw};
  absl::StatusOr<std::unique_ptr<Client>> connected = Client::Connect(options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  std::unique_ptr<Client> client = std::move(*connected);
  CounterRef counter = client->Get<CounterRef>("k");
  AddRequest add;
  add.set_amount(3);
  ASSERT_EQ(counter.Add(add).Get()->value(), 3);

  // A call that runs until the silo dies: an endless volley between two
  // bench grains.
  Tally tally;
  bench::PingPongRequest volley;
  volley.set_peer("b");
  volley.set_exchanges(int64_t{1} << 50);
  Detach(
      client->Get<bench::BenchGrainRef>("a").PingPong(volley),
      [&](absl::StatusOr<bench::PingPongReply> r) { tally.Add(r.status()); });
  ASSERT_EQ(client->in_flight(), 1);
  silo->Signal(SIGKILL);
  EXPECT_EQ(silo->Wait(), 128 + SIGKILL);
  // UNAVAILABLE, not the 30 s default deadline.
  ASSERT_TRUE(tally.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return tally.ok + tally.unavailable + tally.other == 1;
  }));
  {
    MutexLock lock(&tally.mu);
    EXPECT_EQ(tally.unavailable, 1) << tally.other_example;
  }
  EXPECT_THAT(counter.Add(add).Get(), StatusIs(absl::StatusCode::kUnavailable));

  // The silo restarts on the same gateway port; the same client object
  // reconnects and works.
  std::vector<std::string> args = AnyPorts(dir);
  args[0] = "--gateway=" + gw;
  silo = std::make_unique<SiloProcess>(args);
  ASSERT_THAT(silo->ReadyLine(), HasSubstr("READY gateway=" + gw));
  ASSERT_TRUE(client->WaitForConnected(absl::Seconds(30)).ok());
  absl::StatusOr<examples::CounterValue> v = counter.Add(add).Get();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->value(), 3);  // a new silo generation; state was in memory
  client->Close();
  silo->Signal(SIGTERM);
  EXPECT_EQ(silo->Wait(), 0);
}

TEST(ClientProcessTest,
     SigtermUnderLoadDeactivatesEveryActivationAndExitsZero) {
  std::vector<std::string> args = AnyPorts(TempDir("sdk-term"));
  args.push_back("--log_level=info");  // the stop line reports the counts
  SiloProcess silo(args);
  const std::string ready = silo.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));

  ClientOptions options;
  options.gateways = {Field(ready, "gateway")};
  options.max_in_flight = 256;
  absl::StatusOr<std::unique_ptr<Client>> connected = Client::Connect(options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  std::unique_ptr<Client> client = std::move(*connected);

  constexpr int kGrains = 500;
  Tally tally;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> issued{0};
  std::thread load([&] {
    AddRequest add;
    add.set_amount(1);
    for (int64_t i = 0; !stop.load(); ++i) {
      issued.fetch_add(1);
      Detach(
          client->Get<CounterRef>(absl::StrCat("load-", i % kGrains)).Add(add),
          [&](absl::StatusOr<examples::CounterValue> r) {
            tally.Add(r.status());
          });
    }
  });
  ASSERT_TRUE(tally.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return tally.ok >= 5 * kGrains;
  }));
  silo.Signal(SIGTERM);
  const int exit_code = silo.Wait();
  stop.store(true);
  load.join();
  EXPECT_EQ(exit_code, 0);
  // Every call got an answer: served, or UNAVAILABLE once the silo stopped.
  ASSERT_TRUE(tally.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return tally.ok + tally.unavailable + tally.other == issued.load();
  }));
  {
    MutexLock lock(&tally.mu);
    EXPECT_EQ(tally.other, 0) << tally.other_example;
  }

  // OnDeactivate ran for every activation; none was abandoned.
  const std::string err = silo.Stderr();
  const size_t at = err.rfind(" activated=");  // the "stopped" line
  ASSERT_NE(at, std::string::npos) << err;
  int64_t activated = -1, deactivated = -2, abandoned = -1;
  ASSERT_EQ(
      sscanf(err.c_str() + at, " activated=%ld deactivated=%ld abandoned=%ld",
             &activated, &deactivated, &abandoned),
      3);
  EXPECT_GE(activated, kGrains);
  EXPECT_EQ(deactivated, activated);
  EXPECT_EQ(abandoned, 0);
  client->Close();
}

// Deposits over many accounts, many in flight at once, each counted as
// acknowledged or as unknown (failed or unanswered: it may or may not have
// happened). Thread-safe.
struct DepositLedger {
  explicit DepositLedger(int accounts)
      : acked(static_cast<size_t>(accounts), 0),
        unknown(static_cast<size_t>(accounts), 0) {}
  Mutex mu;
  std::vector<int64_t> acked ABSL_GUARDED_BY(mu);
  std::vector<int64_t> unknown ABSL_GUARDED_BY(mu);
  int64_t acked_calls ABSL_GUARDED_BY(mu) = 0;
  int64_t sent ABSL_GUARDED_BY(mu) = 0;
  int64_t answered ABSL_GUARDED_BY(mu) = 0;  // with any outcome

  // Sends deposit `i` (account i % accounts, amount 1..7).
  void Send(Client& client, int i) {
    const size_t account = static_cast<size_t>(i) % acked.size();
    examples::Amount amount;
    amount.set_amount(i % 7 + 1);
    {
      MutexLock lock(&mu);
      ++sent;
    }
    Detach(client.Get<examples::BankAccountRef>(absl::StrCat("acct-", account))
               .Deposit(amount),
           [this, account,
            value = amount.amount()](absl::StatusOr<examples::Balance> b) {
             MutexLock lock(&mu);
             ++answered;
             if (b.ok()) {
               acked[account] += value;
               ++acked_calls;
             } else {
               unknown[account] += value;
             }
           });
  }
  bool WaitUntil(const std::function<bool()>& pred) {
    MutexLock lock(&mu);
    return mu.AwaitWithTimeout(
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return pred(); },
        absl::Seconds(120));
  }
};

// SIGKILL while deposits are in flight: after a restart on the same data
// every acknowledged deposit is in its balance, and an unanswered one may or
// may not be.
TEST(ClientProcessTest, AcknowledgedWritesSurviveKillNineWithWritesInFlight) {
  const std::string dir = TempDir("crash");
  auto silo = std::make_unique<SiloProcess>(AnyPorts(dir));
  const std::string ready = silo->ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  ClientOptions options;
  options.gateways = {Field(ready, "gateway")};
  options.max_in_flight = 512;  // the sender waits for room past this
  absl::StatusOr<std::unique_ptr<Client>> connected = Client::Connect(options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  std::unique_ptr<Client> client = std::move(*connected);

  constexpr int kAccounts = 1000;
  DepositLedger ledger(kAccounts);
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    for (int i = 0; !stop.load(); ++i) ledger.Send(*client, i);
  });
  // Killed once thousands of deposits were acknowledged, while the sender
  // keeps hundreds in flight.
  ASSERT_TRUE(ledger.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return ledger.acked_calls >= 3000;
  }));
  const int in_flight_at_kill = client->in_flight();
  silo->Signal(SIGKILL);
  EXPECT_EQ(silo->Wait(), 128 + SIGKILL);
  stop.store(true);
  sender.join();
  ASSERT_TRUE(ledger.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return ledger.answered == ledger.sent;
  }));
  EXPECT_GT(in_flight_at_kill, 0) << "no write was in flight at the kill";

  std::vector<std::string> args = AnyPorts(dir);
  args[0] = "--gateway=" + Field(ready, "gateway");
  silo = std::make_unique<SiloProcess>(args);
  ASSERT_THAT(silo->ReadyLine(), HasSubstr("READY"));
  ASSERT_TRUE(client->WaitForConnected(absl::Seconds(30)).ok());
  MutexLock lock(&ledger.mu);
  int64_t unknown_total = 0, lost = 0;
  for (size_t account = 0; account < kAccounts; ++account) {
    absl::StatusOr<examples::Balance> b =
        client->Get<examples::BankAccountRef>(absl::StrCat("acct-", account))
            .GetBalance(examples::GetBalanceRequest())
            .Get();
    ASSERT_TRUE(b.ok()) << b.status();
    if (b->balance() < ledger.acked[account]) ++lost;
    EXPECT_LE(b->balance(), ledger.acked[account] + ledger.unknown[account])
        << "acct-" << account << " has deposits nobody sent";
    unknown_total += ledger.unknown[account];
  }
  EXPECT_EQ(lost, 0) << "accounts that lost acknowledged deposits";
  EXPECT_GT(unknown_total, 0) << "no deposit was cut off by the kill";
  std::cout << "deposits acknowledged: " << ledger.acked_calls << " of "
            << ledger.sent << "; in flight at the kill: " << in_flight_at_kill
            << "\n";
  client->Close();
  silo->Signal(SIGTERM);
  EXPECT_EQ(silo->Wait(), 0);
}

// The JSON of `granary call Alarm/<key> Get`, once `pred(json)` holds;
// "" after 60 s.
template <typename Pred>
std::string WaitForAlarm(const std::string& gw, const std::string& key,
                         Pred pred) {
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (absl::Now() < give_up) {
    ToolRun r = Cli(gw, {"call", "Alarm/" + key, "Get"});
    if (r.exit_code == 0 && pred(r.out)) return r.out;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return "";
}

// The integer after `"name":"` in a JSON reply (int64 fields are strings).
int64_t JsonInt(const std::string& json, const std::string& name) {
  const std::string tag = "\"" + name + "\":\"";
  const size_t at = json.find(tag);
  if (at == std::string::npos) return 0;
  int64_t v = 0;
  const size_t from = at + tag.size();
  if (!absl::SimpleAtoi(json.substr(from, json.find('"', from) - from), &v)) {
    return -1;
  }
  return v;
}

// The status line "activations  N (activated A, ...)": A.
int64_t ActivatedTotal(const std::string& gw) {
  ToolRun r = Cli(gw, {"status"});
  const size_t at = r.out.find("(activated ");
  if (at == std::string::npos) return -1;
  int64_t v = -1;
  const size_t from = at + 11;
  (void)absl::SimpleAtoi(r.out.substr(from, r.out.find(',', from) - from), &v);
  return v;
}

TEST(ReminderProcessTest, RemindersTickAgainAfterKillNineWithoutAnyCall) {
  const std::string dir = TempDir("reminders");
  std::vector<std::string> args = AnyPorts(dir);
  args.push_back("--min_reminder_period=200ms");
  auto silo = std::make_unique<SiloProcess>(args);
  std::string ready = silo->ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  std::string gw = Field(ready, "gateway");

  ToolRun set = Cli(gw, {"call", "Alarm/kitchen", "Set",
                         R"({"name":"beat","due_ms":0,"period_ms":200})"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_THAT(set.out, HasSubstr(R"("name":"beat")"));
  EXPECT_THAT(set.out, HasSubstr(R"("periodMs":"200")"));
  std::string before = WaitForAlarm(gw, "kitchen", [](const std::string& j) {
    return JsonInt(j, "ticks") >= 2;
  });
  ASSERT_NE(before, "");

  silo->Signal(SIGKILL);
  EXPECT_EQ(silo->Wait(), 128 + SIGKILL);
  const int64_t restart_ms = absl::ToUnixMillis(absl::Now());
  silo = std::make_unique<SiloProcess>(args);
  ready = silo->ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY"));
  gw = Field(ready, "gateway");
  // Nothing calls the grain: a tick of the stored reminder activates it.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (ActivatedTotal(gw) < 1 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GE(ActivatedTotal(gw), 1);
  std::string after = WaitForAlarm(gw, "kitchen", [&](const std::string& j) {
    return JsonInt(j, "lastTickUnixMs") >= restart_ms;
  });
  ASSERT_NE(after, "") << "no tick after the restart; before: " << before;
  EXPECT_GT(JsonInt(after, "ticks"), JsonInt(before, "ticks"));

  // Bad input through the gateway: refused with the right code, nothing
  // changes, the silo lives.
  ToolRun fast = Cli(gw, {"call", "Alarm/kitchen", "Set",
                          R"({"name":"fast","due_ms":0,"period_ms":10})"});
  EXPECT_EQ(fast.exit_code, 1);
  EXPECT_THAT(fast.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(fast.err, HasSubstr("below this silo's minimum"));
  ToolRun unnamed = Cli(
      gw, {"call", "Alarm/kitchen", "Set", R"({"due_ms":0,"period_ms":1000})"});
  EXPECT_THAT(unnamed.err, HasSubstr("INVALID_ARGUMENT"));
  ToolRun missing =
      Cli(gw, {"call", "Alarm/kitchen", "Cancel", R"({"name":"nope"})"});
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));
  ToolRun cancel =
      Cli(gw, {"call", "Alarm/kitchen", "Cancel", R"({"name":"beat"})"});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_THAT(cancel.out, HasSubstr(R"("periodMs":"0")"));  // ticks stay
  silo->Signal(SIGTERM);
  EXPECT_EQ(silo->Wait(), 0);
}

TEST(ReminderProcessTest, ABadMinimumPeriodIsRefusedAtStart) {
  for (const char* bad : {"0s", "-1s", "inf", "soon"}) {
    std::vector<std::string> args = AnyPorts(TempDir("reminders-bad"));
    args.push_back(std::string("--min_reminder_period=") + bad);
    ToolRun r = RunTool(GRANARY_SILO_BINARY, args);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_THAT(r.err, HasSubstr("min_reminder_period")) << bad;
    EXPECT_EQ(r.out, "") << bad;
  }
}

}  // namespace
}  // namespace granary::testing
