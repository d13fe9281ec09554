// Runtime behaviour in one process: turns, single activation, reentrancy,
// deadlines, idle collection, timers and errors. Time is a FakeClock; tests
// wait for events, never for wall-clock time.
#include "silo/runtime/runtime.h"

#include <atomic>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "examples/counter_grain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/wait.h"
#include "tests/process_util.h"
#include "tests/silo_fixture.h"
#include "tests/test_grains.h"

using ::granary::matchers::StatusIs;

namespace granary::testing {
namespace {

using ::granary::examples::AddRequest;
using ::granary::examples::CounterRef;
using ::granary::examples::CounterValue;
using ::granary::examples::GetRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

AddRequest Amount(int64_t n) {
  AddRequest r;
  r.set_amount(n);
  return r;
}

class RuntimeTest : public SiloFixture {
 protected:
  void SetUp() override {
    SiloFixtureOptions options;
    options.clock = &clock_;
    options.host.shutdown_timeout = absl::Seconds(6);  // 2 s to deactivate
    options.host.gateway = "";
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
  }

  FakeClock clock_;  // outlives the silo: TearDown stops and frees it
};

TEST_F(RuntimeTest, CounterAddGetAndOneWayBump) {
  auto counter = silo_->Get<CounterRef>("alice");
  EXPECT_EQ(counter.Add(Amount(5)).Get()->value(), 5);
  EXPECT_EQ(counter.Add(Amount(2)).Get()->value(), 7);
  counter.Bump(Amount(10));
  // Bump and Get come from one sender, so the mailbox keeps their order.
  EXPECT_EQ(counter.Get(GetRequest()).Get()->value(), 17);
  EXPECT_EQ(silo_->ActivationCount(), 1u);
}

// On a clock of the test's the membership lease lapses exactly when that
// clock passes it; grain code then waits until the lease is renewed.
TEST_F(RuntimeTest, OnAFakeClockTheLeaseLapsesWhenTheClockPassesIt) {
  auto counter = silo_->Get<CounterRef>("leased");
  ASSERT_TRUE(counter.Add(Amount(1)).Get().ok());
  silo_->internals().RenewLease(ClockNanos(clock_) +
                                absl::ToInt64Nanoseconds(absl::Seconds(1)));
  EXPECT_EQ(silo_->internals().lease_until_ns(), INT64_MAX);  // holds
  clock_.Advance(absl::Milliseconds(900));
  EXPECT_EQ(silo_->internals().lease_until_ns(), INT64_MAX);
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(WaitUntil(
      [&] { return silo_->internals().lease_until_ns() == INT64_MIN; }));
  // Lapsed: a call is taken but its turn waits for the lease.
  Notification done;
  Detach(counter.Add(Amount(1)),
         [&done](absl::StatusOr<CounterValue>) { done.Notify(); });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  silo_->internals().RenewLease(ClockNanos(clock_) +
                                absl::ToInt64Nanoseconds(absl::Seconds(1)));
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(counter.Get(GetRequest()).Get()->value(), 2);
}

// While the lease is lapsed, activations with calls wait off the workers
// (parked): the workers still run other work, and every parked activation
// runs once the lease is renewed.
TEST_F(RuntimeTest, WhileTheLeaseIsLapsedGrainsWaitOffTheWorkers) {
  constexpr int kGrains = 8;  // more than the workers
  for (int i = 0; i < kGrains; ++i) {
    ASSERT_TRUE(
        silo_->Get<CounterRef>(absl::StrCat("p", i)).Add(Amount(1)).Get().ok());
  }
  silo_->internals().RenewLease(ClockNanos(clock_) +
                                absl::ToInt64Nanoseconds(absl::Seconds(1)));
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(WaitUntil(
      [&] { return silo_->internals().lease_until_ns() == INT64_MIN; }));
  const uint64_t waits = silo_->internals().lease_waits();
  // (Shared: a failed test's calls end in TearDown, after this frame.)
  auto answered_count = std::make_shared<std::atomic<int>>(0);
  std::atomic<int>& answered = *answered_count;
  for (int i = 0; i < kGrains; ++i) {
    Detach(silo_->Get<CounterRef>(absl::StrCat("p", i)).Add(Amount(1)),
           [answered_count](absl::StatusOr<CounterValue> r) {
             if (r.ok()) answered_count->fetch_add(1);
           });
  }
  ASSERT_TRUE(WaitUntil(
      [&] { return silo_->internals().lease_waits() >= waits + kGrains; }));
  // No worker is held by a grain waiting for the lease.
  struct Probe final : silo::Runnable {
    Notification ran;
    void Run() override { ran.Notify(); }
  };
  Probe probes[4];
  for (Probe& p : probes) silo_->internals().scheduler().Schedule(&p);
  for (Probe& p : probes) {
    EXPECT_TRUE(p.ran.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }
  EXPECT_EQ(answered.load(), 0);
  silo_->internals().RenewLease(ClockNanos(clock_) +
                                absl::ToInt64Nanoseconds(absl::Seconds(10)));
  EXPECT_TRUE(WaitUntil([&] { return answered.load() == kGrains; }));
  for (int i = 0; i < kGrains; ++i) {
    EXPECT_EQ(silo_->Get<CounterRef>(absl::StrCat("p", i))
                  .Get(GetRequest())
                  .Get()
                  ->value(),
              2);
  }
}

// An Add past the largest int64 overflowed (undefined behaviour, reported
// by UBSan under fuzz/gateway_batch; in practice the counter wrapped to a
// negative value). Seed: fuzz/corpus/gateway_batch/regression-counter-overflow.
TEST_F(RuntimeTest, CounterRefusesToOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  auto counter = silo_->Get<CounterRef>("full");
  EXPECT_EQ(counter.Add(Amount(kMax)).Get()->value(), kMax);
  EXPECT_THAT(counter.Add(Amount(1)).Get(),
              StatusIs(absl::StatusCode::kOutOfRange));
  counter.Bump(Amount(1));  // refused as well, silently
  EXPECT_EQ(counter.Get(GetRequest()).Get()->value(), kMax);
  EXPECT_EQ(counter.Add(Amount(-kMax)).Get()->value(), 0);
  EXPECT_EQ(counter.Add(Amount(kMin)).Get()->value(), kMin);
  EXPECT_THAT(counter.Add(Amount(-1)).Get(),
              StatusIs(absl::StatusCode::kOutOfRange));
}

TEST_F(RuntimeTest, TurnIsolationFromManyOutsideThreads) {
  constexpr int kThreads = 64;
  constexpr int kTotal = 100000;
  auto counter = silo_->Get<CounterRef>("shared");
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    const int n = kTotal / kThreads + (t < kTotal % kThreads ? 1 : 0);
    threads.emplace_back([counter, n] {
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(counter.Add(Amount(1)).Get().ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter.Get(GetRequest()).Get()->value(), kTotal);
}

TEST_F(RuntimeTest, TurnIsolationFromGrainsOnAllWorkers) {
  constexpr int kDrivers = 64;
  constexpr int kPerDriver = 100000 / kDrivers;  // 1562
  std::atomic<int> done{0};
  Notification all_done;
  for (int d = 0; d < kDrivers; ++d) {
    AddManyRequest r;
    r.set_counter("from-grains");
    r.set_count(kPerDriver);
    Detach(silo_->Get<DriverRef>("driver-" + std::to_string(d)).AddMany(r),
           [&](absl::StatusOr<Text> t) {
             EXPECT_TRUE(t.ok()) << t.status();  // the total is checked below
             if (done.fetch_add(1) + 1 == kDrivers) all_done.Notify();
           });
  }
  all_done.WaitForNotification();
  EXPECT_EQ(
      silo_->Get<CounterRef>("from-grains").Get(GetRequest()).Get()->value(),
      kDrivers * kPerDriver);
}

TEST_F(RuntimeTest, SingleActivationUnderContention) {
  constexpr int kCalls = 10000;
  constexpr int kKeys = 100;
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  Notification all_done;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kCalls; i += 4) {
        Detach(silo_->Get<LifecycleRef>("fresh-" + std::to_string(i % kKeys))
                   .Touch(MakeText("x")),
               [&](absl::StatusOr<Text> r) {
                 if (!r.ok()) failed.fetch_add(1);
                 if (done.fetch_add(1) + 1 == kCalls) all_done.Notify();
               });
      }
    });
  }
  for (auto& t : threads) t.join();
  all_done.WaitForNotification();
  EXPECT_EQ(failed.load(), 0);
  MutexLock lock(&state_.mu);
  int total = 0;
  for (const auto& [key, n] : state_.activations) {
    EXPECT_EQ(n, 1) << key;
    total += n;
  }
  EXPECT_EQ(total, kKeys);
  EXPECT_EQ(state_.activations.size(), static_cast<size_t>(kKeys));
}

TEST_F(RuntimeTest, CallChainReentersNonReentrantGrain) {
  PeerRequest r;
  r.set_peer("b");
  absl::StatusOr<Text> reply = silo_->Get<TurnsRef>("a")
                                   .CallPeer(r, CallOptions{absl::Seconds(30)})
                                   .Get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->text(), "peer said callback leaf from b");
}

TEST_F(RuntimeTest, RequestOutsideTheChainWaitsForTheTurnToEnd) {
  auto grain = silo_->Get<TurnsRef>("blocker");
  Notification block_done, leaf_done;
  Detach(grain.Block(MakeText("")),
         [&](absl::StatusOr<Text>) { block_done.Notify(); });
  ASSERT_TRUE(state_.WaitForLog("block-start"));
  Detach(grain.Leaf(MakeText("")),
         [&](absl::StatusOr<Text>) { leaf_done.Notify(); });
  // Leaf is queued ahead of Release; it must still wait for Block's turn.
  ASSERT_TRUE(grain.Release(MakeText("")).Get().ok());
  block_done.WaitForNotification();
  leaf_done.WaitForNotification();
  EXPECT_THAT(state_.Log(),
              ElementsAre("block-start", "release", "block-done", "leaf"));
}

TEST_F(RuntimeTest, ReadOnlyRequestsInterleaveOnlyWithEachOther) {
  auto grain = silo_->Get<TurnsRef>("reader");
  Notification readblock_done, write_done;
  Detach(grain.ReadBlock(MakeText("")),
         [&](absl::StatusOr<Text>) { readblock_done.Notify(); });
  ASSERT_TRUE(state_.WaitForLog("readblock-start"));
  // A read-only request runs while the read-only ReadBlock is suspended.
  ASSERT_TRUE(grain.Read(MakeText("")).Get().ok());
  // A write waits until ReadBlock finishes.
  Detach(grain.Write(MakeText("")),
         [&](absl::StatusOr<Text>) { write_done.Notify(); });
  ASSERT_TRUE(grain.Release(MakeText("")).Get().ok());
  readblock_done.WaitForNotification();
  write_done.WaitForNotification();
  EXPECT_THAT(state_.Log(), ElementsAre("readblock-start", "read", "release",
                                        "readblock-done", "write"));
}

TEST_F(RuntimeTest, ReentrantTypeInterleavesAnyRequest) {
  auto grain = silo_->Get<InterleavedRef>("r");
  Notification block_done;
  Detach(grain.Block(MakeText("")),
         [&](absl::StatusOr<Text>) { block_done.Notify(); });
  ASSERT_TRUE(state_.WaitForLog("block-start"));
  // Not in Block's chain, yet it runs while Block is suspended.
  ASSERT_TRUE(grain.Leaf(MakeText("")).Get().ok());
  ASSERT_TRUE(grain.Release(MakeText("")).Get().ok());
  block_done.WaitForNotification();
  EXPECT_THAT(state_.Log(),
              ElementsAre("block-start", "leaf", "release", "block-done"));
}

TEST_F(RuntimeTest, FailedActivationFailsTheCallAndIsRetriedLater) {
  auto bad = silo_->Get<FaultyRef>("bad-1");
  absl::StatusOr<Text> r = bad.Echo(MakeText("x")).Get();
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(r.status().message(), HasSubstr("cannot load bad-1"));
  // Nothing is left behind; the next call tries to activate again.
  r = bad.Echo(MakeText("x")).Get();
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInternal));
  {
    MutexLock lock(&state_.mu);
    EXPECT_EQ(state_.activations["bad-1"], 2);
  }
  EXPECT_EQ(silo_->Get<FaultyRef>("good").Echo(MakeText("y")).Get()->text(),
            "y");
}

TEST_F(RuntimeTest, DeadlineExceededWhenGrainNeverReplies) {
  Notification failed;
  absl::Status status;
  Detach(silo_->Get<ProbeRef>("hung").Hang(MakeText(""),
                                           CallOptions{absl::Seconds(5)}),
         [&](absl::StatusOr<Text> r) {
           status = r.status();
           failed.Notify();
         });
  ASSERT_TRUE(state_.WaitForLog("hang-start:hung"));
  clock_.Advance(absl::Seconds(6));
  failed.WaitForNotification();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(status.message(), HasSubstr("unknown"));
  // The silo stays healthy.
  EXPECT_EQ(silo_->Get<ProbeRef>("other").Echo(MakeText("ok")).Get()->text(),
            "ok");
  EXPECT_EQ(silo_->Get<CounterRef>("c").Add(Amount(1)).Get()->value(), 1);
}

TEST_F(RuntimeTest, DeadlinePassesWhileCallWaitsBehindSuspendedRequest) {
  // "busy" suspends in Block; "caller" (a grain) calls busy.Leaf with a 5 s
  // deadline, which queues behind Block. The deadline must reach the caller
  // while busy still holds the queued call.
  auto busy = silo_->Get<TurnsRef>("busy");
  Notification block_done, caller_done;
  Detach(busy.Block(MakeText("")),
         [&](absl::StatusOr<Text>) { block_done.Notify(); });
  ASSERT_TRUE(state_.WaitForLog("block-start"));
  const size_t armed_before = silo_->internals().timers().size();
  absl::StatusOr<Text> outcome;
  PeerRequest r;
  r.set_peer("busy");
  Detach(silo_->Get<TurnsRef>("caller").LeafWithTimeout(
             r, CallOptions{absl::Seconds(60)}),
         [&](absl::StatusOr<Text> t) {
           outcome = std::move(t);
           caller_done.Notify();
         });
  // Two more deadlines are armed once the caller's call and its Leaf call
  // are both on their way; only then may time move.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (silo_->internals().timers().size() < armed_before + 2 &&
         absl::Now() < give_up) {
    std::this_thread::yield();
  }
  ASSERT_EQ(silo_->internals().timers().size(), armed_before + 2);
  clock_.Advance(absl::Seconds(6));
  caller_done.WaitForNotification();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->text(), "DEADLINE_EXCEEDED");
  // busy continues; the expired Leaf is dropped or answered into the void.
  ASSERT_TRUE(busy.Release(MakeText("")).Get().ok());
  block_done.WaitForNotification();
  EXPECT_EQ(busy.Read(MakeText("")).Get()->text(), "read");
}

TEST_F(RuntimeTest, IdleGrainIsCollectedBusyOneIsNot) {
  auto idle = silo_->Get<LifecycleRef>("idle");
  auto busy = silo_->Get<LifecycleRef>("busy");
  ASSERT_TRUE(idle.Touch(MakeText("")).Get().ok());
  ASSERT_TRUE(busy.Touch(MakeText("")).Get().ok());
  clock_.Advance(absl::Seconds(40));
  ASSERT_TRUE(busy.Touch(MakeText("")).Get().ok());
  clock_.Advance(absl::Seconds(30));  // idle: 70 s > 60 s; busy: 30 s
  ASSERT_TRUE(state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return state_.deactivations["idle"] == 1;
  }));
  {
    MutexLock lock(&state_.mu);
    EXPECT_EQ(state_.deactivations["busy"], 0);
  }
  // A call after deactivation activates the grain again.
  ASSERT_TRUE(idle.Touch(MakeText("")).Get().ok());
  MutexLock lock(&state_.mu);
  EXPECT_EQ(state_.activations["idle"], 2);
  EXPECT_EQ(state_.activations["busy"], 1);
}

TEST_F(RuntimeTest, DeactivateOnIdleThenReactivate) {
  auto grain = silo_->Get<LifecycleRef>("explicit");
  ASSERT_TRUE(grain.Deactivate(MakeText("")).Get().ok());
  ASSERT_TRUE(state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return state_.deactivations["explicit"] == 1;
  }));
  ASSERT_TRUE(grain.Touch(MakeText("")).Get().ok());
  MutexLock lock(&state_.mu);
  EXPECT_EQ(state_.activations["explicit"], 2);
}

TEST_F(RuntimeTest, TimerTicksAreTurnsThatNeverOverlapAndStopOnDeactivation) {
  auto grain = silo_->Get<LifecycleRef>("ticker");
  const size_t timers_before = silo_->internals().timers().size();
  TimerRequest start;
  start.set_period_ms(1000);
  ASSERT_TRUE(grain.StartTimer(start).Get().ok());
  for (int i = 1; i <= 5; ++i) {
    clock_.Advance(absl::Seconds(1));
    // Requests arriving while a tick is suspended must wait for it.
    for (int j = 0; j < 10; ++j) grain.Touch(MakeText("")).Get().IgnoreError();
    ASSERT_TRUE(state_.WaitUntil(
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state_.ticks >= i; }));
    // A request runs only after the tick's turn ended, and the timer is
    // re-armed as that turn ends: once Stats answers, the next Advance fires.
    ASSERT_TRUE(grain.Stats(MakeText("")).Get().ok());
  }
  TimerStats stats = *grain.Stats(MakeText("")).Get();
  EXPECT_EQ(stats.ticks(), 5);
  EXPECT_EQ(stats.overlaps(), 0);

  ASSERT_TRUE(grain.Deactivate(MakeText("")).Get().ok());
  ASSERT_TRUE(state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return state_.deactivations["ticker"] == 1;
  }));
  // The grain's timer left the timer queue with the activation.
  EXPECT_EQ(silo_->internals().timers().size(), timers_before);
  clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(silo_->Get<ProbeRef>("barrier").Echo(MakeText("")).Get()->text(),
            "");
  MutexLock lock(&state_.mu);
  EXPECT_EQ(state_.ticks, 5);
  EXPECT_EQ(state_.activations["ticker"], 1);
}

TEST_F(RuntimeTest, ThrowingMethodYieldsInternalWithMessage) {
  ThrowRequest r;
  r.set_message("kaboom");
  absl::StatusOr<Text> reply = silo_->Get<ProbeRef>("thrower").Throw(r).Get();
  EXPECT_THAT(reply, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(reply.status().message(), HasSubstr("kaboom"));
  // The grain chose its status.
  r.set_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
  reply = silo_->Get<ProbeRef>("thrower").Throw(r).Get();
  EXPECT_THAT(reply, StatusIs(absl::StatusCode::kFailedPrecondition));
  // The activation survives its exceptions.
  EXPECT_EQ(silo_->Get<ProbeRef>("thrower")
                .Echo(MakeText("still here"))
                .Get()
                ->text(),
            "still here");
}

// Runtime::CallSerialized from this (plain) thread.
absl::StatusOr<std::string> CallSerialized(silo::Runtime* silo,
                                           std::string type, std::string key,
                                           std::string method,
                                           std::string payload) {
  return Flatten(silo->CallSerialized(std::move(type), std::move(key),
                                      std::move(method), std::move(payload))
                     .Get());
}

TEST_F(RuntimeTest, UnknownMethodTypeAndMalformedPayload) {
  std::string payload = MakeText("x").SerializeAsString();
  auto r = CallSerialized(silo_, "granary.testing.Probe", "k", "NoSuchMethod",
                          payload);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(r.status().message(), HasSubstr("NoSuchMethod"));

  r = CallSerialized(silo_, "granary.testing.NoSuchType", "k", "Echo", payload);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(r.status().message(), HasSubstr("granary.testing.NoSuchType"));

  r = CallSerialized(silo_, "granary.testing.Probe", "k", "Echo",
                     "\xff\xff\xff");
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument));

  r = CallSerialized(silo_, "granary.testing.Probe", "", "Echo", payload);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument));
  r = CallSerialized(silo_, "granary.testing.Probe",
                     std::string(kMaxGrainKeyBytes + 1, 'k'), "Echo", payload);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument));

  r = CallSerialized(silo_, "granary.testing.Probe", "k", "Echo", payload);
  ASSERT_TRUE(r.ok()) << r.status();
  Text reply;
  ASSERT_TRUE(reply.ParseFromString(*r));
  EXPECT_EQ(reply.text(), "x");

  // A grain type this silo does not host, through a typed reference.
  absl::StatusOr<Text> unhosted =
      silo_->Get<UnhostedRef>("k").Echo(MakeText("x")).Get();
  EXPECT_THAT(unhosted, StatusIs(absl::StatusCode::kUnimplemented));

  // A reference with no runtime at all, used outside grain code.
  absl::StatusOr<Text> orphan = ProbeRef("k").Echo(MakeText("x")).Get();
  EXPECT_THAT(orphan, StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(RuntimeTest, StopDeactivatesGrainsAndRefusesNewCalls) {
  ASSERT_TRUE(silo_->Get<LifecycleRef>("s1").Touch(MakeText("")).Get().ok());
  ASSERT_TRUE(silo_->Get<LifecycleRef>("s2").Touch(MakeText("")).Get().ok());
  silo_->Stop();
  {
    MutexLock lock(&state_.mu);
    EXPECT_EQ(state_.deactivations["s1"], 1);
    EXPECT_EQ(state_.deactivations["s2"], 1);
  }
  EXPECT_EQ(silo_->ActivationCount(), 0u);
  auto after = silo_->Get<LifecycleRef>("s3").Touch(MakeText("")).Get();
  EXPECT_THAT(after, StatusIs(absl::StatusCode::kUnavailable));
  silo_->Stop();  // idempotent
}

// A silo that holds at most ten activations.
class MemoryPressureTest : public SiloFixture {
 protected:
  void SetUp() override {
    SiloFixtureOptions options;
    options.clock = &clock_;
    options.host.max_activations = 10;
    options.host.gateway = "";
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
  }

  FakeClock clock_;
};

TEST_F(MemoryPressureTest, TheLeastRecentlyUsedIdleActivationsAreShed) {
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(silo_->Get<LifecycleRef>(absl::StrCat("g", i))
                    .Touch(MakeText(""))
                    .Get()
                    .ok());
    clock_.Advance(absl::Milliseconds(1));
  }
  // Full: a new activation is refused, existing ones still answer.
  EXPECT_THAT(silo_->Get<LifecycleRef>("new").Touch(MakeText("")).Get(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("--max_activations")));
  EXPECT_THAT(silo_->metrics_registry().Render(),
              HasSubstr("granary_activations_refused_total{reason="
                        "\"max_activations\"} 1\n"));
  ASSERT_TRUE(silo_->Get<LifecycleRef>("g0").Touch(MakeText("")).Get().ok());
  // The next pressure check sheds down to 80%: the two least recently
  // used (g1 and g2; g0 was just used).
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return state_.deactivations["g1"] == 1 && state_.deactivations["g2"] == 1;
  }));
  {
    MutexLock lock(&state_.mu);
    for (int i : {0, 3, 4, 5, 6, 7, 8, 9}) {
      EXPECT_EQ(state_.deactivations[absl::StrCat("g", i)], 0) << i;
    }
  }
  // Room is made once the shed activations are gone from the catalog, just
  // after their OnDeactivate returns.
  EXPECT_TRUE(Eventually([&] {
    return silo_->Get<LifecycleRef>("new").Touch(MakeText("")).Get().ok();
  }));
  // A deactivation is counted once the grain's own OnDeactivate (which the
  // wait above saw) has returned.
  EXPECT_TRUE(Eventually([&] {
    return absl::StrContains(silo_->metrics_registry().Render(),
                             "reason=\"memory_pressure\"} 2\n");
  }));
}

TEST(SiloTest, RejectsDuplicateTypesAndLateRegistration) {
  silo::Runtime silo;
  EXPECT_TRUE(silo.AddGrain<examples::CounterGrain>().ok());
  EXPECT_THAT(silo.AddGrain<examples::CounterGrain>(),
              StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_TRUE(silo.Start().ok());
  EXPECT_THAT(silo.Start(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(silo.AddGrain<examples::PingGrain>(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  silo.Stop();
}

TEST(SiloTest, SingleWorkerWithTurnBudgetOneStillCompletesChains) {
  silo::RuntimeOptions options;
  options.workers = 1;
  options.turn_budget = 1;
  silo::Runtime silo(options);
  TestState state;
  ASSERT_TRUE(AddTestGrains(silo, &state).ok());
  ASSERT_TRUE(silo.Start().ok());
  PeerRequest r;
  r.set_peer("y");
  absl::StatusOr<Text> reply = silo.Get<TurnsRef>("x").CallPeer(r).Get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->text(), "peer said callback leaf from y");
  silo.Stop();
}

}  // namespace
}  // namespace granary::testing
