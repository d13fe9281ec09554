// Durable reminders in one process (the fixture in tests/reminder_fixture.h):
// a tick activates a grain that is not active, reminders survive a silo
// restart on the same table (memory and RocksDB), unregistering stops the
// ticks, a name registered again replaces the reminder, bad arguments are
// refused, a grain without the hook fails its ticks without harm, and an
// unreadable or unwritable table keeps the silo from starting or fails the
// write. Reminders by range are in tests/reminder_range_test.cc. Time is a
// FakeClock: ticks fire when the test advances it.
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/runtime.h"
#include "storage/memory_storage.h"
#include "storage/rocksdb_storage.h"
#include "tests/reminder_fixture.h"
#include "tests/test_grains.h"

using ::granary::matchers::StatusIs;

namespace granary::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ReminderTest : public ReminderFixture,
                     public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "rocksdb") {
      dir_ =
          std::filesystem::temp_directory_path() /
          absl::StrCat(
              "granary-reminder-test-", getpid(), "-",
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
      std::filesystem::remove_all(dir_);
      storage::RocksDbOptions options;
      options.data_dir = dir_.string();
      options.durability = storage::Durability::kAsync;
      auto opened = storage::RocksDbStorage::Open(options);
      ASSERT_TRUE(opened.ok()) << opened.status();
      rocks_ = *std::move(opened);
      table_ = rocks_.get();
    } else {
      table_ = &memory_;
    }
    StartSilo();
  }
  void TearDown() override {
    StopSilo();
    rocks_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A silo on the test's reminder table and fake clock (no gateway).
  void StartSilo() { ASSERT_NO_FATAL_FAILURE(StartSiloOn(table_)); }

  storage::MemoryReminderTable memory_;
  std::filesystem::path dir_;
  std::unique_ptr<storage::RocksDbStorage> rocks_;
  storage::ReminderTable* table_ = nullptr;
};

TEST_P(ReminderTest, TickActivatesAGrainThatIsNotActive) {
  RemindRef grain = silo_->Get<RemindRef>("sleeper");
  ASSERT_TRUE(grain.Register(Reminder("wake", 1000, 1000)).Get().ok());
  ASSERT_TRUE(grain.Deactivate(Text()).Get().ok());
  ASSERT_TRUE(state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return state_.deactivations["sleeper"] == 1;
  }));
  const uint64_t activated_before = silo_->internals().activated();
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(WaitForTicks("sleeper/wake", 1));
  EXPECT_EQ(silo_->internals().activated(), activated_before + 1);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(WaitForTicks("sleeper/wake", 2));
  MutexLock lock(&state_.mu);
  const std::vector<uint64_t>& ids =
      state_.reminder_activations["sleeper/wake"];
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], ids[1]);  // the tick's activation stayed active
}

// With the default quota (64 per grain) a grain's 65th reminder is refused
// and nothing is written; names already registered may be registered
// again, and another grain still has room.
TEST_P(ReminderTest, AGrainPastItsReminderQuotaIsRefused) {
  RemindRef grain = silo_->Get<RemindRef>("greedy");
  const int quota = silo::ReminderQuotas().per_grain;
  ASSERT_EQ(quota, 64);
  for (int i = 0; i < quota; ++i) {
    ASSERT_TRUE(
        grain.Register(Reminder(absl::StrCat("r", i), 60000, 60000)).Get().ok())
        << i;
  }
  auto refused = grain.Register(Reminder("one-more", 60000, 60000)).Get();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("--max_reminders_per_grain"));
  EXPECT_EQ(silo_->internals().reminders().size(), static_cast<size_t>(quota));
  auto rows = table_->ReadAll().Get();  // the task's outcome: the table's
  ASSERT_TRUE(rows.ok() && rows->ok());
  EXPECT_EQ((*rows)->size(), static_cast<size_t>(quota));  // nothing written
  EXPECT_TRUE(
      grain.Register(Reminder("r0", 1000, 60000)).Get().ok());  // replaced
  EXPECT_TRUE(silo_->Get<RemindRef>("modest")
                  .Register(Reminder("r", 60000, 60000))
                  .Get()
                  .ok());
  // Room again once one is gone.
  ASSERT_TRUE(grain.Unregister(Reminder("r1", 0, 0)).Get().ok());
  EXPECT_TRUE(grain.Register(Reminder("one-more", 60000, 60000)).Get().ok());
}

TEST_P(ReminderTest, RemindersFireAfterASiloRestart) {
  ASSERT_TRUE(silo_->Get<RemindRef>("durable")
                  .Register(Reminder("beat", 2000, 1000))
                  .Get()
                  .ok());
  ASSERT_TRUE(silo_->Get<RemindRef>("durable")
                  .Register(Reminder("slow", 2000, 5000))
                  .Get()
                  .ok());
  StopSilo();
  EXPECT_EQ(Ticks("durable/beat"), 0);
  StartSilo();  // same table; nothing calls the grain
  EXPECT_EQ(silo_->internals().reminders().size(), 2u);
  EXPECT_EQ(silo_->ActivationCount(), 0u);
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(WaitForTicks("durable/beat", 1));
  ASSERT_TRUE(WaitForTicks("durable/slow", 1));
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(WaitForTicks("durable/beat", 2));
  EXPECT_EQ(Ticks("durable/slow"), 1);
  EXPECT_EQ(silo_->internals().activated(),
            1u);  // activated by the first tick alone
  auto list = silo_->Get<RemindRef>("durable").List(Text()).Get();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(list->names(), ElementsAre("beat", "slow"));
  EXPECT_THAT(list->period_ms(), ElementsAre(1000, 5000));
}

TEST_P(ReminderTest, UnregisterStopsTheTicksForGood) {
  RemindRef grain = silo_->Get<RemindRef>("quitter");
  RemindRef sentinel = silo_->Get<RemindRef>("sentinel");
  ASSERT_TRUE(grain.Register(Reminder("r", 1000, 1000)).Get().ok());
  ASSERT_TRUE(sentinel.Register(Reminder("r", 1000, 1000)).Get().ok());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(WaitForTicks("quitter/r", 1));
  ASSERT_TRUE(WaitForTicks("sentinel/r", 1));
  EXPECT_EQ(grain.Unregister(Reminder("r", 0, 0)).Get()->text(), "removed");
  EXPECT_EQ(grain.Unregister(Reminder("r", 0, 0)).Get()->text(), "absent");
  for (int i = 2; i <= 4; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(WaitForTicks("sentinel/r", i));
  }
  EXPECT_EQ(Ticks("quitter/r"), 1);
  // Gone from the table too: a restart brings back only the sentinel.
  StopSilo();
  StartSilo();
  EXPECT_EQ(silo_->internals().reminders().size(), 1u);
}

TEST_P(ReminderTest, RegisteringANameAgainReplacesIt) {
  RemindRef grain = silo_->Get<RemindRef>("changer");
  RemindRef sentinel = silo_->Get<RemindRef>("sentinel");
  ASSERT_TRUE(grain.Register(Reminder("r", 1000, 1000)).Get().ok());
  ASSERT_TRUE(grain.Register(Reminder("r", 3000, 3000)).Get().ok());
  ASSERT_TRUE(sentinel.Register(Reminder("s", 1000, 1000)).Get().ok());
  auto list = grain.List(Text()).Get();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(list->names(), ElementsAre("r"));
  EXPECT_THAT(list->period_ms(), ElementsAre(3000));
  EXPECT_EQ(silo_->internals().reminders().size(), 2u);
  // The replaced 1 s reminder never ticks; the 3 s one does, once per 3 s.
  for (int i = 1; i <= 2; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(WaitForTicks("sentinel/s", i));
  }
  EXPECT_EQ(Ticks("changer/r"), 0);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(WaitForTicks("changer/r", 1));
  ASSERT_TRUE(WaitForTicks("sentinel/s", 3));
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(WaitForTicks("sentinel/s", 4));
  EXPECT_EQ(Ticks("changer/r"), 1);
}

TEST_P(ReminderTest, TicksMissedWhileTheGrainWasBusyOrTheSiloDownAreSkipped) {
  const absl::Time t0 = clock_.Now();
  RemindRef grain = silo_->Get<RemindRef>("skipper");
  ASSERT_TRUE(grain.Register(Reminder("r", 1000, 1000)).Get().ok());
  // Five periods pass at once: the late tick runs, then the one due now;
  // the three in between are not replayed.
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(WaitForTicks("skipper/r", 2));
  const absl::Time next = t0 + absl::Seconds(6);
  // The schedule is the reminder service's, not TestState's: poll it (a
  // TestState wait would only look again when TestState changes).
  auto scheduled_next = [&] {
    std::vector<ReminderTick> r = silo_->internals().reminders().ListHere(
        GrainId(RemindRef::kTypeName, "skipper"));
    return r.size() == 1 && r[0].current_tick == next;
  };
  for (int i = 0; i < 6000 && !scheduled_next(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(scheduled_next());
  EXPECT_EQ(Ticks("skipper/r"), 2);
  // Down for 10 periods: after the restart the next tick is the next one
  // due on the reminder's grid, not a burst of the missed ones.
  StopSilo();
  clock_.Advance(absl::Seconds(10) + absl::Milliseconds(500));
  StartSilo();
  std::vector<ReminderTick> r = silo_->internals().reminders().ListHere(
      GrainId(RemindRef::kTypeName, "skipper"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].current_tick, t0 + absl::Seconds(16));
  EXPECT_EQ(r[0].first_tick, t0 + absl::Seconds(1));
  clock_.Advance(absl::Milliseconds(500));
  ASSERT_TRUE(WaitForTicks("skipper/r", 3));
}

TEST_P(ReminderTest, BadArgumentsAreRefusedAndNothingIsStored) {
  RemindRef grain = silo_->Get<RemindRef>("careless");
  for (const ReminderRequest& bad :
       {Reminder("", 1000, 1000), Reminder(std::string(300, 'n'), 1000, 1000),
        Reminder("negative-due", -5, 1000), Reminder("too-fast", 0, 999),
        Reminder("zero-period", 0, 0)}) {
    auto r = grain.Register(bad).Get();
    ASSERT_FALSE(r.ok()) << bad.ShortDebugString();
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument)) << r.status();
  }
  auto list = grain.List(Text()).Get();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->names_size(), 0);
  EXPECT_EQ(silo_->internals().reminders().size(), 0u);
  // The grain and the silo carry on.
  EXPECT_TRUE(grain.Register(Reminder("fine", 0, 1000)).Get().ok());
}

TEST_P(ReminderTest, ATickOfAGrainWithoutTheHookFailsHarmlessly) {
  ForgetfulRef grain = silo_->Get<ForgetfulRef>("forgetful");
  ASSERT_TRUE(grain.Register(Reminder("r", 1000, 1000)).Get().ok());
  clock_.Advance(absl::Seconds(1));
  for (int i = 0;
       i < 2000 && silo_->internals().reminders().ticks_failed() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(silo_->internals().reminders().ticks_failed(), 1u);
  // It keeps ticking (and failing), and the grain still serves calls.
  clock_.Advance(absl::Seconds(1));
  for (int i = 0; i < 2000 && silo_->internals().reminders().ticks_failed() < 2;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(silo_->internals().reminders().ticks_failed(), 2u);
  EXPECT_EQ(silo_->internals().reminders().ticks_sent(), 2u);
  EXPECT_TRUE(grain.Register(Reminder("r", 1000, 1000)).Get().ok());
}

INSTANTIATE_TEST_SUITE_P(Tables, ReminderTest,
                         ::testing::Values("memory", "rocksdb"));

// A table that cannot be read.
class BrokenTable final : public storage::ReminderTable {
 public:
  Task<absl::Status> Upsert(storage::ReminderRow) override {
    co_return absl::UnavailableError("disk on fire");
  }
  Task<absl::Status> Remove(GrainId, std::string) override {
    co_return absl::UnavailableError("disk on fire");
  }
  Task<absl::StatusOr<std::vector<storage::ReminderRow>>> ReadAll() override {
    co_return absl::UnavailableError("disk on fire");
  }
};

// The silo's quota, set small here (--max_reminders defaults to 100,000):
// past it every new reminder is refused, whatever its grain.
TEST(ReminderQuotaTest, ASiloPastItsReminderQuotaRefusesNewOnes) {
  storage::MemoryReminderTable table;
  TestState state;
  silo::RuntimeOptions options;
  options.reminders = &table;
  options.workers = 2;
  options.max_reminders = 5;
  silo::Runtime silo(options);
  ASSERT_TRUE(AddTestGrains(silo, &state).ok());
  ASSERT_TRUE(silo.Start().ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(silo.Get<RemindRef>(absl::StrCat("g", i))
                    .Register(Reminder("r", 60000, 60000))
                    .Get()
                    .ok());
  }
  auto refused =
      silo.Get<RemindRef>("g5").Register(Reminder("r", 60000, 60000)).Get();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(refused.status().message(), HasSubstr("--max_reminders"));
  EXPECT_EQ(silo.internals().reminders().size(), 5u);
  silo.Stop();
}

TEST(ReminderTableFailureTest, AnUnreadableTableKeepsTheSiloFromStarting) {
  BrokenTable table;
  silo::RuntimeOptions options;
  options.reminders = &table;
  silo::Runtime silo(options);
  absl::Status started = silo.Start();
  EXPECT_THAT(started, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(started.message(), HasSubstr("cannot load reminders"));
  EXPECT_THAT(started.message(), HasSubstr("disk on fire"));
}

TEST(ReminderTableFailureTest, AFailedWriteReachesTheGrainAndSchedulesNothing) {
  // Reads work, writes fail: start from an empty table.
  class WriteOnlyBroken final : public storage::ReminderTable {
   public:
    Task<absl::Status> Upsert(storage::ReminderRow row) override {
      co_return co_await table_.Upsert(std::move(row));
    }
    Task<absl::Status> Remove(GrainId g, std::string n) override {
      co_return co_await table_.Remove(std::move(g), std::move(n));
    }
    Task<absl::StatusOr<std::vector<storage::ReminderRow>>> ReadAll() override {
      co_return std::vector<storage::ReminderRow>{};
    }
    BrokenTable table_;
  } writes_fail;
  TestState state;
  silo::RuntimeOptions options;
  options.reminders = &writes_fail;
  options.workers = 2;
  silo::Runtime silo(options);
  ASSERT_TRUE(AddTestGrains(silo, &state).ok());
  ASSERT_TRUE(silo.Start().ok());
  auto r = silo.Get<RemindRef>("x").Register(Reminder("r", 0, 1000)).Get();
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(r.status().message(), HasSubstr("disk on fire"));
  EXPECT_EQ(silo.internals().reminders().size(), 0u);
  auto u = silo.Get<RemindRef>("x").Unregister(Reminder("r", 0, 0)).Get();
  EXPECT_THAT(u, StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace granary::testing
