// Scheduler: the workers, and HelpScope (a network thread running the first
// runnable it schedules itself while every worker sleeps).
#include "silo/runtime/scheduler.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "core/sync.h"
#include "gtest/gtest.h"

namespace granary::silo {
namespace {

// Records where and how it ran.
class Probe final : public Runnable {
 public:
  void Run() override {
    thread_ = std::this_thread::get_id();
    helping_ = Scheduler::Helping();
    if (gate_ != nullptr) {
      entered_.Notify();
      gate_->WaitForNotification();
    }
    for (Runnable* next : then_) scheduler_->Schedule(next);
    runs_.fetch_add(1);
    ran_.Notify();
  }

  bool WaitRan() {
    return ran_.WaitForNotificationWithTimeout(absl::Seconds(10));
  }
  std::thread::id thread() const { return thread_; }
  bool helping() const { return helping_; }
  int runs() const { return runs_.load(); }

  Notification* gate_ = nullptr;  // Run waits for it, if set
  // Run schedules these on scheduler_, in order.
  Scheduler* scheduler_ = nullptr;
  std::vector<Runnable*> then_;
  Notification entered_;

 private:
  std::thread::id thread_;
  bool helping_ = false;
  std::atomic<int> runs_{0};
  Notification ran_;
};

// Opens a scope, schedules `p` in it and runs what was kept, until `p` ran
// on this thread (the workers fell asleep first); false after 10 s.
bool RunHelped(Scheduler& s, Probe* p) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    auto fresh = std::make_unique<Probe>();
    {
      Scheduler::HelpScope scope(&s);
      s.Schedule(fresh.get());
      scope.RunKept();
    }
    if (!fresh->WaitRan()) return false;
    if (fresh->thread() == std::this_thread::get_id()) {
      Scheduler::HelpScope scope(&s);
      s.Schedule(p);
      scope.RunKept();
      if (p->thread() == std::this_thread::get_id()) return true;
      // A worker woke meanwhile and took it: try again.
      if (!p->WaitRan()) return false;
      return false;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

// A push while a worker spins wakes no sleeper: the spinner must take it,
// also when it stops spinning at that moment. Lone runnables, scheduled
// from several threads after pauses that let the workers spin out and
// sleep, each run; a wake-up lost between spinning and sleeping would
// leave one unrun.
TEST(SchedulerTest, NoWorkIsLostBetweenSpinningAndSleeping) {
  for (int spin : {0, 1, 40, 2000}) {
    Scheduler s(2, spin);
    ASSERT_TRUE(s.Start().ok());
    constexpr int kThreads = 3, kEach = 400;
    std::vector<std::unique_ptr<Probe>> probes(kThreads * kEach);
    for (auto& p : probes) p = std::make_unique<Probe>();
    std::atomic<int> unrun{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < kThreads; ++t) {
      callers.emplace_back([&, t] {
        for (int i = 0; i < kEach && unrun.load() == 0; ++i) {
          Probe* p = probes[t * kEach + i].get();
          s.Schedule(p);
          if (i % 3 == 0) {
            // Alone in the queue: it runs, or a wake-up was lost.
            if (!p->WaitRan()) unrun.fetch_add(1);
            absl::SleepFor(absl::Microseconds((i * 7 + t * 13) % 50));
          }
        }
      });
    }
    for (auto& c : callers) c.join();
    bool all_ran = unrun.load() == 0;
    for (auto& p : probes) all_ran = all_ran && p->WaitRan();
    s.Stop();  // before the probes go, also when one was left unrun
    ASSERT_TRUE(all_ran) << "idle_spin=" << spin;
    for (auto& p : probes) EXPECT_EQ(p->runs(), 1);
  }
}

TEST(SchedulerTest, WorkersRunWhatIsScheduled) {
  Scheduler s(2, /*idle_spin=*/0);
  ASSERT_TRUE(s.Start().ok());
  Probe p;
  s.Schedule(&p);
  ASSERT_TRUE(p.WaitRan());
  EXPECT_NE(p.thread(), std::this_thread::get_id());
  EXPECT_FALSE(p.helping());
  s.Stop();
}

TEST(SchedulerTest, AHelperRunsWhatItSchedulesWhileTheWorkersSleep) {
  Scheduler s(2, /*idle_spin=*/0);
  ASSERT_TRUE(s.Start().ok());
  Probe p;
  ASSERT_TRUE(RunHelped(s, &p));
  EXPECT_TRUE(p.helping());
  EXPECT_EQ(p.runs(), 1);
  EXPECT_FALSE(Scheduler::Helping());  // only inside the run
  s.Stop();
}

// A chain started by a helper (a gateway call whose grain calls a grain)
// runs on the helper, link after link, up to kHelperRuns runs; the rest is
// the workers'.
TEST(SchedulerTest, AHelperRunsNextWhatItsRunSchedules) {
  Scheduler s(2, /*idle_spin=*/0);
  ASSERT_TRUE(s.Start().ok());
  constexpr int kLinks = Scheduler::kHelperRuns + 2;
  std::vector<std::unique_ptr<Probe>> links(kLinks);
  for (auto& p : links) p = std::make_unique<Probe>();
  for (int i = 0; i + 1 < kLinks; ++i) {
    links[i]->scheduler_ = &s;
    links[i]->then_ = {links[i + 1].get()};
  }
  ASSERT_TRUE(RunHelped(s, links[0].get()));
  for (auto& p : links) ASSERT_TRUE(p->WaitRan());
  for (int i = 0; i < kLinks; ++i) {
    const bool on_helper = i < Scheduler::kHelperRuns;
    EXPECT_EQ(links[i]->thread() == std::this_thread::get_id(), on_helper)
        << "link " << i;
    EXPECT_EQ(links[i]->helping(), on_helper) << "link " << i;
    EXPECT_EQ(links[i]->runs(), 1);
  }
  EXPECT_FALSE(Scheduler::Helping());
  s.Stop();
}

// The helper's slot holds one runnable, LIFO like a worker's: of two that
// a run schedules, the helper runs the second and the first is the
// workers'.
TEST(SchedulerTest, AHelpersSlotHandsTheDisplacedRunnableToTheWorkers) {
  Scheduler s(2, /*idle_spin=*/0);
  ASSERT_TRUE(s.Start().ok());
  Probe first;
  Probe second;
  Probe head;
  head.scheduler_ = &s;
  head.then_ = {&first, &second};
  ASSERT_TRUE(RunHelped(s, &head));
  ASSERT_TRUE(first.WaitRan());
  ASSERT_TRUE(second.WaitRan());
  EXPECT_NE(first.thread(), std::this_thread::get_id());
  EXPECT_FALSE(first.helping());
  EXPECT_EQ(second.thread(), std::this_thread::get_id());
  EXPECT_TRUE(second.helping());
  s.Stop();
}

// Runs twice: the first run schedules itself again, as an activation does
// when it has messages left after its turn budget.
class Again final : public Runnable {
 public:
  explicit Again(Scheduler* s) : scheduler_(s) {}
  void Run() override {
    if (runs_.load() == 0) {
      first_ = std::this_thread::get_id();
      runs_.store(1);
      scheduler_->Schedule(this);  // last: another thread may run it now
      return;
    }
    second_ = std::this_thread::get_id();
    second_helping_ = Scheduler::Helping();
    runs_.store(2);
    done_.Notify();
  }
  Scheduler* const scheduler_;
  std::atomic<int> runs_{0};
  std::thread::id first_, second_;
  bool second_helping_ = true;
  Notification done_;
};

// What a helper's run leaves undone is the workers': a runnable that
// schedules itself is not run again on the helper.
TEST(SchedulerTest, ARunsOwnLeftoversGoToTheWorkers) {
  Scheduler s(2, /*idle_spin=*/0);
  ASSERT_TRUE(s.Start().ok());
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  bool helped = false;
  while (!helped && absl::Now() < give_up) {
    auto warm = std::make_unique<Probe>();  // the workers sleep after it
    RunHelped(s, warm.get());
    ASSERT_TRUE(warm->WaitRan());
    Again again(&s);
    {
      Scheduler::HelpScope scope(&s);
      s.Schedule(&again);
      scope.RunKept();
    }
    ASSERT_TRUE(again.done_.WaitForNotificationWithTimeout(absl::Seconds(10)));
    helped = again.first_ == std::this_thread::get_id();
    if (!helped) continue;  // a worker woke and took it: try again
    EXPECT_NE(again.second_, std::this_thread::get_id());
    EXPECT_FALSE(again.second_helping_);
  }
  EXPECT_TRUE(helped);
  s.Stop();
}

TEST(SchedulerTest, OnlyTheFirstRunnableOfAScopeIsKept) {
  Scheduler s(2, /*idle_spin=*/0);
  ASSERT_TRUE(s.Start().ok());
  Probe warm;
  ASSERT_TRUE(RunHelped(s, &warm));  // the workers sleep now
  Probe first;
  Probe second;
  {
    Scheduler::HelpScope scope(&s);
    s.Schedule(&first);
    s.Schedule(&second);  // to a worker, at once
    ASSERT_TRUE(second.WaitRan());
    EXPECT_NE(second.thread(), std::this_thread::get_id());
    scope.RunKept();
  }
  ASSERT_TRUE(first.WaitRan());
  EXPECT_EQ(first.runs(), 1);
  EXPECT_EQ(second.runs(), 1);
  s.Stop();
}

TEST(SchedulerTest, AScopeLeftWithoutRunningHandsItsRunnableToTheWorkers) {
  Scheduler s(2, /*idle_spin=*/0);
  ASSERT_TRUE(s.Start().ok());
  Probe warm;
  ASSERT_TRUE(RunHelped(s, &warm));
  Probe p;
  {
    Scheduler::HelpScope scope(&s);
    s.Schedule(&p);
  }
  ASSERT_TRUE(p.WaitRan());
  EXPECT_EQ(p.runs(), 1);
  EXPECT_FALSE(p.helping());
  s.Stop();
}

TEST(SchedulerTest, ScopesDoNotNest) {
  Scheduler s(2, /*idle_spin=*/0);
  ASSERT_TRUE(s.Start().ok());
  Probe warm;
  ASSERT_TRUE(RunHelped(s, &warm));
  Probe outer_kept;
  {
    Scheduler::HelpScope outer(&s);
    {
      Scheduler::HelpScope nested(&s);
      s.Schedule(&outer_kept);  // kept by the outer scope only
      nested.RunKept();         // runs nothing
    }
    EXPECT_EQ(outer_kept.runs(), 0);
    outer.RunKept();
  }
  ASSERT_TRUE(outer_kept.WaitRan());
  s.Stop();
}

TEST(SchedulerTest, DisallowedHelpKeepsNothing) {
  Scheduler s(2, /*idle_spin=*/0, /*allow_help=*/false);
  ASSERT_TRUE(s.Start().ok());
  for (int i = 0; i < 20; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
    Probe p;
    Scheduler::HelpScope scope(&s);
    s.Schedule(&p);
    scope.RunKept();
    ASSERT_TRUE(p.WaitRan());
    EXPECT_NE(p.thread(), std::this_thread::get_id());
  }
  s.Stop();
}

TEST(SchedulerTest, NothingIsKeptBeforeStartOrAfterStop) {
  Scheduler s(2, /*idle_spin=*/0);
  Probe before;
  {
    Scheduler::HelpScope scope(&s);
    s.Schedule(&before);
    scope.RunKept();
  }
  EXPECT_EQ(before.runs(), 0);  // queued; the workers start later
  ASSERT_TRUE(s.Start().ok());
  ASSERT_TRUE(before.WaitRan());
  s.Stop();
  Probe after;
  {
    Scheduler::HelpScope scope(&s);
    s.Schedule(&after);
    scope.RunKept();
  }
  EXPECT_EQ(after.runs(), 0);  // left unrun, like everything queued
}

TEST(SchedulerTest, StopWaitsForAHelperThatIsRunning) {
  Scheduler s(2, /*idle_spin=*/0);
  ASSERT_TRUE(s.Start().ok());
  Probe warm;
  ASSERT_TRUE(RunHelped(s, &warm));
  Notification gate;
  Probe slow;
  slow.gate_ = &gate;
  std::thread helper([&] { ASSERT_TRUE(RunHelped(s, &slow)); });
  ASSERT_TRUE(slow.entered_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    s.Stop();
    stopped.store(true);
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(stopped.load());  // the helper's run is not over
  gate.Notify();
  stopper.join();
  helper.join();
  EXPECT_TRUE(stopped.load());
  EXPECT_EQ(slow.runs(), 1);
}

}  // namespace
}  // namespace granary::silo
