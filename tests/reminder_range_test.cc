// Reminders by range in one process (the fixture in
// tests/reminder_fixture.h): a silo schedules only the rows it owns,
// Rebalance follows ownership and the table (also when a register,
// unregister or replace lands between its read and its apply), requests for
// other grains go to the keeper, the refresh finds rows written elsewhere,
// and a due time sent by two silos runs once. Time is a FakeClock: ticks
// fire when the test advances it.
#include <chrono>
#include <coroutine>
#include <initializer_list>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/status.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/runtime.h"
#include "storage/memory_storage.h"
#include "tests/reminder_fixture.h"
#include "tests/test_grains.h"

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;

namespace granary::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// --- Reminders by range (SetRanges, Rebalance: docs/architecture.md 3.5) ---

// A memory table whose next ReadAll, once asked, takes its snapshot and then
// waits for the test: a Rebalance held between its read and its apply.
class PausableTable final : public storage::ReminderTable {
 public:
  ~PausableTable() override { Resume(); }

  Task<absl::Status> Upsert(storage::ReminderRow row) override {
    co_return co_await rows_.Upsert(std::move(row));
  }
  Task<absl::Status> Remove(GrainId grain, std::string name) override {
    co_return co_await rows_.Remove(std::move(grain), std::move(name));
  }
  Task<absl::StatusOr<std::vector<storage::ReminderRow>>> ReadAll() override {
    absl::StatusOr<std::vector<storage::ReminderRow>> rows =
        co_await rows_.ReadAll();
    bool pause;
    {
      MutexLock lock(&mu_);
      pause = std::exchange(pause_next_, false);
    }
    if (pause) co_await Park{this};
    co_return std::move(rows);
  }

  void PauseNextRead() {
    MutexLock lock(&mu_);
    pause_next_ = true;
  }
  // Whether a read is waiting for Resume.
  bool paused() {
    MutexLock lock(&mu_);
    return static_cast<bool>(parked_);
  }
  // Lets the waiting read finish: its reader resumes on this thread.
  void Resume() {
    std::coroutine_handle<> h;
    {
      MutexLock lock(&mu_);
      h = std::exchange(parked_, nullptr);
    }
    if (h) h.resume();
  }

  // The rows, read now.
  std::vector<storage::ReminderRow> Rows() {
    auto rows = Flatten(rows_.ReadAll().Get());
    EXPECT_TRUE(rows.ok()) << rows.status();
    return rows.ok() ? *std::move(rows) : std::vector<storage::ReminderRow>{};
  }

 private:
  struct Park {
    PausableTable* table;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) {
      MutexLock lock(&table->mu_);
      table->parked_ = h;
    }
    void await_resume() const noexcept {}
  };

  storage::MemoryReminderTable rows_;
  Mutex mu_;
  bool pause_next_ ABSL_GUARDED_BY(mu_) = false;
  std::coroutine_handle<> parked_ ABSL_GUARDED_BY(mu_);
};

// The silo a request for a grain this silo does not own goes to: records
// each call and answers with fixed values.
class FakeKeeper final : public silo::ReminderKeeper {
 public:
  static constexpr absl::Time kFirstTick = absl::FromUnixSeconds(42);

  Task<absl::StatusOr<absl::Time>> Register(GrainId grain, std::string name,
                                            absl::Duration due,
                                            absl::Duration period) override {
    Record(absl::StrCat("Register ", grain.key(), "/", name, " ",
                        absl::FormatDuration(due), " ",
                        absl::FormatDuration(period)));
    co_return kFirstTick;
  }
  Task<absl::StatusOr<bool>> Unregister(GrainId grain,
                                        std::string name) override {
    Record(absl::StrCat("Unregister ", grain.key(), "/", name));
    co_return true;
  }
  Task<absl::StatusOr<std::vector<ReminderTick>>> List(GrainId grain) override {
    Record(absl::StrCat("List ", grain.key()));
    co_return std::vector<ReminderTick>{
        ReminderTick{"kept", kFirstTick, absl::Seconds(7), kFirstTick}};
  }

  std::vector<std::string> calls() {
    MutexLock lock(&mu_);
    return calls_;
  }

 private:
  void Record(std::string call) {
    MutexLock lock(&mu_);
    calls_.push_back(std::move(call));
  }
  Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

// A silo that schedules only the RemindGrain reminders whose key the test
// says it owns (owned_, changed at will), on a PausableTable.
class ReminderRangeTest : public ReminderFixture {
 protected:
  void SetUp() override { t0_ = clock_.Now(); }
  void TearDown() override {
    table_.Resume();  // a test that failed while a reload waited
    ReminderFixture::TearDown();
  }

  // SetRanges(owned_, `refresh`); with `keeper`, other grains' requests go
  // to keeper_. The default refresh never comes in these tests.
  void StartRangeSilo(bool keeper = false,
                      absl::Duration refresh = absl::Hours(24)) {
    ASSERT_NO_FATAL_FAILURE(
        StartSiloOn(&table_, [this, keeper, refresh](silo::Runtime& silo) {
          if (keeper) silo.internals().reminders().SetKeeper(&keeper_);
          silo.internals().reminders().SetRanges(
              [this](const GrainId& grain) {
                MutexLock lock(&owned_mu_);
                return owned_.contains(grain.key());
              },
              refresh);
        }));
  }
  void Own(std::initializer_list<std::string> keys) {
    MutexLock lock(&owned_mu_);
    owned_ = absl::flat_hash_set<std::string>(keys.begin(), keys.end());
  }

  static GrainId Id(const std::string& key) {
    return GrainId(RemindRef::kTypeName, key);
  }
  // Writes reminder "r" of grain `key` to the table directly, as another
  // silo would: first tick `start` after t0_, every second.
  void StoreRow(const std::string& key, absl::Duration start) {
    storage::ReminderRow row{Id(key), "r", t0_ + start, absl::Seconds(1)};
    EXPECT_THAT(Flatten(table_.Upsert(std::move(row)).Get()), IsOk());
  }
  void RemoveRow(const std::string& key) {
    EXPECT_THAT(Flatten(table_.Remove(Id(key), "r").Get()), IsOk());
  }
  silo::ReminderService& reminders() { return silo_->internals().reminders(); }
  // What this silo schedules for grain `key` (reminder names).
  std::vector<std::string> Scheduled(const std::string& key) {
    std::vector<std::string> names;
    for (const ReminderTick& t : reminders().ListHere(Id(key))) {
      names.push_back(t.name);
    }
    return names;
  }

  // The schedule and the service's counters are not TestState's: poll them
  // (a TestState wait would look again only when TestState changes). False
  // after 60 s, which only a broken service reaches.
  template <typename Pred>
  static bool Eventually(Pred pred) {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (!pred()) {
      if (absl::Now() > give_up) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  // Every tick sent so far has finished (run, dropped or failed).
  bool TicksSettle() {
    return Eventually([&] {
      return reminders().ticks_ok() + reminders().ticks_failed() ==
             reminders().ticks_sent();
    });
  }

  // Delivers a tick of reminder "r" of grain `key` (first tick and period as
  // StoreRow's) due at t0_ + `due`, as a silo that believes it owns the
  // grain sends it (decoded from the wire, like GatewayService does), and
  // waits until the grain's activation has run or dropped it.
  absl::Status DeliverRemoteTick(const std::string& key, absl::Duration first,
                                 absl::Duration due) {
    v1::ReminderTickMessage m;
    silo::ToTickMessage(
        ReminderTick{"r", t0_ + first, absl::Seconds(1), t0_ + due}, &m);
    const InterfaceInfo* iface = silo_->FindInterface(RemindRef::kTypeName);
    if (iface == nullptr) return absl::InternalError("no RemindGrain");
    absl::StatusOr<CallBase*> call =
        silo::ReminderCallFromWire(*iface, key, m.SerializeAsString());
    if (!call.ok()) return call.status();
    struct Done {
      absl::Status status;
      Notification finished;
    };
    auto* done = new Done;
    (*call)->SetDoneCallback(
        [](void* ctx, CallBase* c) {
          auto* d = static_cast<Done*>(ctx);
          d->status = c->status();
          d->finished.Notify();
        },
        done);
    silo_->internals().InvokeReminder(*call);  // takes our reference
    if (!done->finished.WaitForNotificationWithTimeout(absl::Seconds(60))) {
      // Left to the call, which may still finish.
      return absl::DeadlineExceededError("the tick never finished");
    }
    absl::Status status = std::move(done->status);
    delete done;
    return status;
  }

  absl::Time t0_;
  PausableTable table_;
  FakeKeeper keeper_;
  Mutex owned_mu_;
  absl::flat_hash_set<std::string> owned_ ABSL_GUARDED_BY(owned_mu_);
};

TEST_F(ReminderRangeTest, StartSchedulesOnlyTheRowsThisSiloOwns) {
  StoreRow("mine", absl::Seconds(1));
  StoreRow("theirs", absl::Milliseconds(500));  // due first, if scheduled
  Own({"mine"});
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo());
  EXPECT_EQ(reminders().size(), 1u);
  EXPECT_THAT(Scheduled("mine"), ElementsAre("r"));
  EXPECT_THAT(Scheduled("theirs"), IsEmpty());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(WaitForTicks("mine/r", 1));
  // The timer thread fires in due order: had "theirs" been scheduled, its
  // tick would have been sent before the one just run.
  EXPECT_EQ(reminders().ticks_sent(), 1u);
  EXPECT_EQ(Ticks("theirs/r"), 0);
  EXPECT_EQ(table_.Rows().size(), 2u);  // another silo's row stays
}

TEST_F(ReminderRangeTest, RebalanceSchedulesWhatMovedHereAndRetiresWhatLeft) {
  StoreRow("leaving", absl::Seconds(1));
  StoreRow("arriving", absl::Seconds(1));
  StoreRow("staying", absl::Seconds(1) + absl::Milliseconds(100));
  Own({"leaving", "staying"});
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo());
  clock_.Advance(absl::Seconds(1) + absl::Milliseconds(100));  // t0 + 1.1 s
  ASSERT_TRUE(WaitForTicks("leaving/r", 1));
  ASSERT_TRUE(WaitForTicks("staying/r", 1));
  ASSERT_TRUE(TicksSettle());
  const std::vector<ReminderTick> staying = reminders().ListHere(Id("staying"));

  Own({"arriving", "staying"});
  reminders().Rebalance();
  ASSERT_TRUE(Eventually([&] {
    return Scheduled("leaving").empty() && Scheduled("arriving").size() == 1;
  }));
  EXPECT_EQ(reminders().size(), 2u);
  // The gained reminder's next tick is on its grid; the one kept stays as
  // it was.
  std::vector<ReminderTick> arriving = reminders().ListHere(Id("arriving"));
  ASSERT_EQ(arriving.size(), 1u);
  EXPECT_EQ(arriving[0].current_tick, t0_ + absl::Seconds(2));
  std::vector<ReminderTick> staying_now = reminders().ListHere(Id("staying"));
  ASSERT_EQ(staying_now.size(), 1u);
  ASSERT_EQ(staying.size(), 1u);
  EXPECT_EQ(staying_now[0].current_tick, staying[0].current_tick);

  clock_.Advance(absl::Seconds(1));  // t0 + 2.1 s
  ASSERT_TRUE(WaitForTicks("arriving/r", 1));
  ASSERT_TRUE(WaitForTicks("staying/r", 2));
  // "leaving" would have been due at 2 s, before "staying" at 2.1 s.
  EXPECT_EQ(reminders().ticks_sent(), 4u);
  EXPECT_EQ(Ticks("leaving/r"), 1);
  EXPECT_EQ(table_.Rows().size(), 3u);  // the new owner ticks it on
}

TEST_F(ReminderRangeTest, RebalanceRetiresARowRemovedBehindItsBack) {
  StoreRow("removed", absl::Seconds(1));
  StoreRow("sentinel", absl::Seconds(1) + absl::Milliseconds(100));
  Own({"removed", "sentinel"});
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo());
  RemoveRow("removed");  // e.g. unregistered through another silo
  EXPECT_EQ(reminders().size(), 2u);
  reminders().Rebalance();
  ASSERT_TRUE(Eventually([&] { return reminders().size() == 1; }));
  EXPECT_THAT(Scheduled("removed"), IsEmpty());
  EXPECT_THAT(Scheduled("sentinel"), ElementsAre("r"));
  clock_.Advance(absl::Seconds(1) + absl::Milliseconds(100));
  ASSERT_TRUE(WaitForTicks("sentinel/r", 1));
  EXPECT_EQ(reminders().ticks_sent(), 1u);
  EXPECT_EQ(Ticks("removed/r"), 0);
}

TEST_F(ReminderRangeTest, ARebalanceKeepsWhatWasRegisteredAfterItsRead) {
  StoreRow("removed", absl::Seconds(1));
  StoreRow("sentinel", absl::Seconds(1) + absl::Milliseconds(100));
  Own({"removed", "sentinel", "late"});
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo());
  table_.PauseNextRead();
  RemoveRow("removed");
  reminders().Rebalance();  // reads the table now, applies on Resume
  ASSERT_TRUE(table_.paused());
  // Registered here after the reload read the table: not in what it read.
  auto first =
      reminders()
          .Register(Id("late"), "r", absl::Seconds(1), absl::Seconds(1))
          .Get();
  ASSERT_THAT(Flatten(std::move(first)), IsOk());
  EXPECT_EQ(reminders().size(), 3u);
  table_.Resume();
  ASSERT_TRUE(Eventually([&] { return reminders().size() == 2; }));
  EXPECT_THAT(Scheduled("late"), ElementsAre("r"));
  EXPECT_THAT(Scheduled("removed"), IsEmpty());
  clock_.Advance(absl::Seconds(1) + absl::Milliseconds(100));
  ASSERT_TRUE(WaitForTicks("late/r", 1));
  ASSERT_TRUE(WaitForTicks("sentinel/r", 1));
  EXPECT_EQ(reminders().ticks_sent(), 2u);
  EXPECT_EQ(Ticks("removed/r"), 0);
}

// The reload applies the rows it read before the Unregister: it schedules
// the removed reminder again, which ticks until the next Rebalance.
TEST_F(ReminderRangeTest, ARebalanceKeepsWhatWasUnregisteredAfterItsRead) {
  StoreRow("quitter", absl::Seconds(1));
  StoreRow("sentinel", absl::Seconds(1) + absl::Milliseconds(100));
  Own({"quitter", "sentinel"});
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo());
  table_.PauseNextRead();
  reminders().Rebalance();
  ASSERT_TRUE(table_.paused());
  auto removed = Flatten(reminders().Unregister(Id("quitter"), "r").Get());
  ASSERT_THAT(removed.status(), IsOk());
  EXPECT_TRUE(*removed);
  EXPECT_EQ(reminders().size(), 1u);
  table_.Resume();
  EXPECT_THAT(Scheduled("quitter"), IsEmpty());
  EXPECT_EQ(reminders().size(), 1u);
  clock_.Advance(absl::Seconds(1) + absl::Milliseconds(100));
  ASSERT_TRUE(WaitForTicks("sentinel/r", 1));
  EXPECT_EQ(reminders().ticks_sent(), 1u);
  EXPECT_THAT(table_.Rows(), SizeIs(1));
}

// The same for a reminder registered again with another schedule: the
// stale row read before replaces the new one.
TEST_F(ReminderRangeTest, ARebalanceKeepsWhatWasReplacedAfterItsRead) {
  StoreRow("changer", absl::Seconds(1));
  Own({"changer"});
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo());
  table_.PauseNextRead();
  reminders().Rebalance();
  ASSERT_TRUE(table_.paused());
  auto first = Flatten(
      reminders()
          .Register(Id("changer"), "r", absl::Seconds(5), absl::Seconds(5))
          .Get());
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(*first, t0_ + absl::Seconds(5));
  table_.Resume();
  std::vector<ReminderTick> now = reminders().ListHere(Id("changer"));
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].first_tick, t0_ + absl::Seconds(5));
  EXPECT_EQ(now[0].period, absl::Seconds(5));
  std::vector<storage::ReminderRow> rows = table_.Rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].period, absl::Seconds(5));
}

TEST_F(ReminderRangeTest, RequestsForAGrainOwnedElsewhereGoToTheKeeper) {
  Own({"mine"});
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo(/*keeper=*/true));
  // Straight to the service.
  auto first = Flatten(
      reminders()
          .Register(Id("theirs"), "r", absl::Seconds(1), absl::Seconds(2))
          .Get());
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(*first, FakeKeeper::kFirstTick);
  auto listed = Flatten(reminders().List(Id("theirs")).Get());
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "kept");
  auto removed = Flatten(reminders().Unregister(Id("theirs"), "r").Get());
  ASSERT_THAT(removed.status(), IsOk());
  EXPECT_TRUE(*removed);
  // Through the grain, as grain code does.
  RemindRef theirs = silo_->Get<RemindRef>("theirs");
  ASSERT_THAT(theirs.Register(Reminder("g", 0, 3000)).Get().status(), IsOk());
  auto names = theirs.List(Text()).Get();
  ASSERT_THAT(names.status(), IsOk());
  EXPECT_THAT(names->names(), ElementsAre("kept"));
  // Arguments are checked here, before anything is sent.
  EXPECT_THAT(Flatten(reminders()
                          .Register(Id("theirs"), "", absl::Seconds(1),
                                    absl::Seconds(1))
                          .Get()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(keeper_.calls(),
              ElementsAre("Register theirs/r 1s 2s", "List theirs",
                          "Unregister theirs/r", "Register theirs/g 0 3s",
                          "List theirs"));
  EXPECT_EQ(reminders().size(), 0u);
  EXPECT_THAT(table_.Rows(), IsEmpty());

  // A grain this silo owns: its table and schedule, not the keeper.
  first =
      Flatten(reminders()
                  .Register(Id("mine"), "r", absl::Seconds(1), absl::Seconds(1))
                  .Get());
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(*first, t0_ + absl::Seconds(1));
  EXPECT_THAT(Scheduled("mine"), ElementsAre("r"));
  EXPECT_THAT(table_.Rows(), SizeIs(1));
  listed = Flatten(reminders().List(Id("mine")).Get());
  ASSERT_THAT(listed.status(), IsOk());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].current_tick, t0_ + absl::Seconds(1));
  removed = Flatten(reminders().Unregister(Id("mine"), "r").Get());
  ASSERT_THAT(removed.status(), IsOk());
  EXPECT_TRUE(*removed);
  EXPECT_EQ(reminders().size(), 0u);
  EXPECT_THAT(table_.Rows(), IsEmpty());
  EXPECT_EQ(keeper_.calls().size(), 5u);
}

TEST_F(ReminderRangeTest, ADueTimeTicksOnceWhenTwoSilosSendIt) {
  // Two silos that both believe they own "twice" each send its tick due
  // at 1 s; the activation runs it once, and a later due time again.
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo());
  const absl::Duration first = absl::Seconds(1);
  ASSERT_THAT(DeliverRemoteTick("twice", first, absl::Seconds(1)), IsOk());
  EXPECT_EQ(Ticks("twice/r"), 1);
  ASSERT_THAT(DeliverRemoteTick("twice", first, absl::Seconds(1)), IsOk());
  EXPECT_EQ(Ticks("twice/r"), 1);
  ASSERT_THAT(DeliverRemoteTick("twice", first, absl::Seconds(2)), IsOk());
  EXPECT_EQ(Ticks("twice/r"), 2);
  // Late: an earlier due time than the last one run.
  ASSERT_THAT(DeliverRemoteTick("twice", first, absl::Seconds(1)), IsOk());
  EXPECT_EQ(Ticks("twice/r"), 2);
  ASSERT_THAT(DeliverRemoteTick("twice", first, absl::Seconds(3)), IsOk());
  EXPECT_EQ(Ticks("twice/r"), 3);
}

TEST_F(ReminderRangeTest, ALocalAndARemoteTickOfOneDueTimeRunOnce) {
  StoreRow("both", absl::Seconds(1));
  Own({"both"});
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo());
  // The other silo's tick due at 1 s comes first, then this silo's.
  ASSERT_THAT(DeliverRemoteTick("both", absl::Seconds(1), absl::Seconds(1)),
              IsOk());
  EXPECT_EQ(Ticks("both/r"), 1);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(Eventually([&] { return reminders().ticks_ok() == 1; }));
  EXPECT_EQ(Ticks("both/r"), 1);
  // This silo's tick due at 2 s first, then the other's.
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(WaitForTicks("both/r", 2));
  ASSERT_THAT(DeliverRemoteTick("both", absl::Seconds(1), absl::Seconds(2)),
              IsOk());
  EXPECT_EQ(Ticks("both/r"), 2);
  ASSERT_TRUE(TicksSettle());
  EXPECT_EQ(reminders().ticks_sent(), 2u);
  EXPECT_EQ(reminders().ticks_failed(), 0u);
}

TEST_F(ReminderRangeTest, TheRefreshPicksUpRowsAnotherSiloWrote) {
  Own({"mine", "mine-too"});
  ASSERT_NO_FATAL_FAILURE(StartRangeSilo(/*keeper=*/false, absl::Seconds(10)));
  StoreRow("mine", absl::Seconds(1));
  StoreRow("theirs", absl::Seconds(1));
  clock_.Advance(absl::Seconds(9));
  EXPECT_EQ(reminders().size(), 0u);  // nothing reads the table before 10 s
  EXPECT_EQ(Ticks("mine/r"), 0);
  clock_.Advance(absl::Seconds(1));  // the refresh: due now, on its grid
  ASSERT_TRUE(WaitForTicks("mine/r", 1));
  EXPECT_THAT(Scheduled("mine"), ElementsAre("r"));
  EXPECT_THAT(Scheduled("theirs"), IsEmpty());
  // The refresh comes again, every 10 s.
  StoreRow("mine-too", absl::Seconds(15));
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(WaitForTicks("mine-too/r", 1));
  EXPECT_EQ(reminders().size(), 2u);
  EXPECT_EQ(Ticks("theirs/r"), 0);
}

}  // namespace
}  // namespace granary::testing
