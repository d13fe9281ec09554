// The PostgreSQL grain storage and reminder table against a real
// PostgreSQL server of the test's own (tests/postgres_server.h, the fixture
// in tests/postgres_fixture.h): grain state writes conditional on the etag,
// tombstones and racing writers; reminder rows upserted, removed, kept apart
// per cluster, skipped when they do not decode, hashed, and written in
// order.
#include <atomic>
#include <cstdint>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/detach.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
#include "storage/postgres/postgres_grain_storage.h"
#include "storage/postgres/postgres_reminder_table.h"
#include "tests/postgres_fixture.h"

namespace granary::storage {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::granary::testing::PostgresTest;
using ::granary::testing::Race;
using ::granary::testing::RaceCounts;
using ::granary::testing::RaceWrite;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// --- grain state -------------------------------------------------------------

TEST_F(PostgresTest, GrainStateWritesAreConditionalOnTheEtag) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  const GrainId id("granary.examples.Counter", "alice");
  using S = PostgresGrainStorage;
  absl::StatusOr<StoredState> absent = S::ReadOn(*db, "c", id);
  ASSERT_THAT(absent.status(), IsOk());
  EXPECT_FALSE(absent->exists);
  EXPECT_EQ(absent->etag, "");
  const std::string bytes("\0state\xff", 7);  // NULs and high bytes survive
  absl::StatusOr<std::string> v1 = S::WriteOn(*db, "c", id, &bytes, "");
  ASSERT_THAT(v1.status(), IsOk());
  absl::StatusOr<StoredState> read = S::ReadOn(*db, "c", id);
  ASSERT_THAT(read.status(), IsOk());
  EXPECT_TRUE(read->exists);
  EXPECT_EQ(read->bytes, bytes);
  EXPECT_EQ(read->etag, *v1);
  const std::string next = "next";
  absl::StatusOr<std::string> v2 = S::WriteOn(*db, "c", id, &next, *v1);
  ASSERT_THAT(v2.status(), IsOk());
  EXPECT_NE(*v2, *v1);
  // A stale etag, a first write over an existing state and a foreign etag
  // are ABORTED and change nothing.
  EXPECT_THAT(S::WriteOn(*db, "c", id, &bytes, *v1),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(S::WriteOn(*db, "c", id, &bytes, ""),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(S::WriteOn(*db, "c", id, &bytes, "not-a-version"),
              StatusIs(absl::StatusCode::kAborted));
  read = S::ReadOn(*db, "c", id);
  ASSERT_THAT(read.status(), IsOk());
  EXPECT_EQ(read->bytes, "next");
  EXPECT_EQ(read->etag, *v2);
  // The same grain in another cluster is another state.
  absl::StatusOr<StoredState> other = S::ReadOn(*db, "other", id);
  ASSERT_THAT(other.status(), IsOk());
  EXPECT_FALSE(other->exists);
}

// libpq takes parameters as C strings: a key with a NUL byte would name
// another grain ("alice\0x" would be "alice"), so it is refused instead.
TEST_F(PostgresTest, AGrainKeyWithANulByteIsRefusedNotTruncated) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  using S = PostgresGrainStorage;
  const GrainId alice("granary.examples.Counter", "alice");
  const GrainId nul("granary.examples.Counter", std::string("alice\0x", 7));
  const std::string bytes = "alice's";
  ASSERT_THAT(S::WriteOn(*db, "c", alice, &bytes, "").status(), IsOk());
  EXPECT_THAT(S::ReadOn(*db, "c", nul).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NUL")));
  const std::string other = "overwritten";
  EXPECT_THAT(S::WriteOn(*db, "c", nul, &other, "").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(S::WriteOn(*db, "c", nul, nullptr, "").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::StatusOr<StoredState> read = S::ReadOn(*db, "c", alice);
  ASSERT_THAT(read.status(), IsOk());
  EXPECT_EQ(read->bytes, bytes);  // alice's state is untouched
}

// A writer that read "absent" must not succeed after another wrote and
// cleared the state: the clear leaves a tombstone with its own etag.
TEST_F(PostgresTest, AClearKeepsATombstoneSoAStaleAbsentReadCannotWrite) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  const GrainId id("granary.examples.Counter", "aba");
  using S = PostgresGrainStorage;
  absl::StatusOr<StoredState> seen_by_a =
      S::ReadOn(*db, "c", id);  // absent, ""
  ASSERT_THAT(seen_by_a.status(), IsOk());
  const std::string b_state = "b";
  absl::StatusOr<std::string> b1 = S::WriteOn(*db, "c", id, &b_state, "");
  ASSERT_THAT(b1.status(), IsOk());
  absl::StatusOr<std::string> tombstone =
      S::WriteOn(*db, "c", id, nullptr, *b1);  // B clears
  ASSERT_THAT(tombstone.status(), IsOk());
  EXPECT_FALSE(tombstone->empty());
  const std::string a_state = "a";
  EXPECT_THAT(S::WriteOn(*db, "c", id, &a_state, seen_by_a->etag),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(S::WriteOn(*db, "c", id, nullptr, seen_by_a->etag),
              StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<StoredState> now = S::ReadOn(*db, "c", id);
  ASSERT_THAT(now.status(), IsOk());
  EXPECT_FALSE(now->exists);
  EXPECT_EQ(now->etag, *tombstone);
  // Whoever read the tombstone may write.
  EXPECT_THAT(S::WriteOn(*db, "c", id, &a_state, now->etag), IsOk());
  // Clearing what was never stored is a no-op with the empty etag.
  EXPECT_THAT(S::WriteOn(*db, "c", GrainId("granary.examples.Counter", "never"),
                         nullptr, ""),
              ::granary::matchers::IsOkAndHolds(std::string()));
}

// Writers racing through the pool with the etag they all read: one wins.
TEST_F(PostgresTest, RacingGrainStateWritersWithOneEtagHaveOneWinner) {
  ASSERT_NE(Migrated(), nullptr);
  std::unique_ptr<PgPool> started = StartedPool();
  ASSERT_NE(started, nullptr);
  PostgresGrainStorage storage(started.get(), "race");
  constexpr int kWriters = 4, kRounds = 15;
  const GrainId id("granary.examples.BankAccount", "acct");
  const RaceCounts counts =
      Race(kWriters, kRounds, [&](int w, int round) -> RaceWrite {
        absl::StatusOr<StoredState> s = Flatten(storage.Read(id).Get());
        if (!s.ok()) return [] { return absl::StatusCode::kUnknown; };
        return [&, w, round, etag = s->etag] {
          return Flatten(
                     storage.Write(id, absl::StrCat(w, "/", round), etag).Get())
              .status()
              .code();
        };
      });
  EXPECT_EQ(counts.other, 0);
  EXPECT_EQ(counts.won, kRounds);
  EXPECT_EQ(counts.aborted, kRounds * (kWriters - 1));
}

// --- reminders ---------------------------------------------------------------

constexpr char kAlarm[] = "granary.examples.Alarm";

ReminderRow Reminder(std::string key, std::string name, int64_t start_us,
                     int64_t period_us) {
  return ReminderRow{GrainId(kAlarm, std::move(key)), std::move(name),
                     absl::FromUnixMicros(start_us),
                     absl::Microseconds(period_us)};
}
// "type/key name start_us period_us": rows as the assertions compare them.
std::string Describe(const ReminderRow& r) {
  return absl::StrCat(r.grain.ToString(), " ", r.name, " ",
                      absl::ToUnixMicros(r.start), " ",
                      absl::ToInt64Microseconds(r.period));
}
std::vector<std::string> Described(
    const absl::StatusOr<std::vector<ReminderRow>>& rows) {
  EXPECT_THAT(rows.status(), IsOk());
  std::vector<std::string> out;
  if (rows.ok()) {
    for (const ReminderRow& r : *rows) out.push_back(Describe(r));
  }
  return out;
}
std::vector<std::string> ReadAllNow(ReminderTable& table) {
  return Described(Flatten(table.ReadAll().Get()));
}

TEST_F(PostgresTest, RemindersAreUpsertedReplacedAndRemovedExactly) {
  ASSERT_NE(Migrated(), nullptr);
  std::unique_ptr<PgPool> pool = StartedPool();
  ASSERT_NE(pool, nullptr);
  PostgresReminderTable table(pool.get(), "c");
  auto upsert = [&](ReminderRow row) {
    return Flatten(table.Upsert(std::move(row)).Get());
  };
  auto remove = [&](std::string key, std::string name) {
    return Flatten(
        table.Remove(GrainId(kAlarm, std::move(key)), std::move(name)).Get());
  };
  // Microseconds survive, before the epoch too.
  ASSERT_THAT(upsert(Reminder("wake", "tick", 1700000000123457, 1500001)),
              IsOk());
  ASSERT_THAT(upsert(Reminder("wake", "tock", -5, 1)), IsOk());
  ASSERT_THAT(upsert(Reminder("snooze", "tick", 7, 60000000)), IsOk());
  EXPECT_THAT(ReadAllNow(table),
              UnorderedElementsAre(
                  absl::StrCat(kAlarm, "/wake tick 1700000000123457 1500001"),
                  absl::StrCat(kAlarm, "/wake tock -5 1"),
                  absl::StrCat(kAlarm, "/snooze tick 7 60000000")));
  // The same grain and name: replaced.
  ASSERT_THAT(upsert(Reminder("wake", "tick", 42, 3)), IsOk());
  EXPECT_THAT(
      ReadAllNow(table),
      UnorderedElementsAre(absl::StrCat(kAlarm, "/wake tick 42 3"),
                           absl::StrCat(kAlarm, "/wake tock -5 1"),
                           absl::StrCat(kAlarm, "/snooze tick 7 60000000")));
  EXPECT_THAT(remove("wake", "tock"), IsOk());
  EXPECT_THAT(remove("wake", "tock"), IsOk());  // gone already
  EXPECT_THAT(remove("never", "tick"), IsOk());
  // A NUL byte cannot reach PostgreSQL in a text parameter: refused, and a
  // remove must not cut "wake\0x" to "wake" and hit that grain's row.
  EXPECT_THAT(upsert(Reminder(std::string("wake\0x", 6), "tick", 1, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NUL")));
  EXPECT_THAT(remove(std::string("wake\0x", 6), "tick"), IsOk());
  EXPECT_THAT(
      ReadAllNow(table),
      UnorderedElementsAre(absl::StrCat(kAlarm, "/wake tick 42 3"),
                           absl::StrCat(kAlarm, "/snooze tick 7 60000000")));
}

TEST_F(PostgresTest, RemindersOfTwoClustersInOneDatabaseAreApart) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  using R = PostgresReminderTable;
  ASSERT_THAT(R::UpsertOn(*db, "c1", Reminder("wake", "tick", 1, 10), 0),
              IsOk());
  ASSERT_THAT(R::UpsertOn(*db, "c2", Reminder("wake", "tick", 2, 20), 0),
              IsOk());
  ASSERT_THAT(R::UpsertOn(*db, "c2", Reminder("other", "tick", 3, 30), 0),
              IsOk());
  EXPECT_THAT(Described(R::ReadAllOn(*db, "c1")),
              ElementsAre(absl::StrCat(kAlarm, "/wake tick 1 10")));
  ASSERT_THAT(R::RemoveOn(*db, "c1", GrainId(kAlarm, "wake"), "tick"), IsOk());
  EXPECT_THAT(Described(R::ReadAllOn(*db, "c1")), IsEmpty());
  EXPECT_THAT(Described(R::ReadAllOn(*db, "c2")),
              UnorderedElementsAre(absl::StrCat(kAlarm, "/wake tick 2 20"),
                                   absl::StrCat(kAlarm, "/other tick 3 30")));
}

TEST_F(PostgresTest, AReminderRowThatDoesNotDecodeIsSkippedByReadAll) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  using R = PostgresReminderTable;
  ASSERT_THAT(R::UpsertOn(*db, "c", Reminder("a", "tick", 1, 1), 0), IsOk());
  ASSERT_THAT(R::UpsertOn(*db, "c", Reminder("b", "tick", 2, 2), 0), IsOk());
  // Rows no silo wrote: an empty key, a key past kMaxGrainKeyBytes, no type.
  ASSERT_THAT(
      db->Exec("INSERT INTO granary_reminders (cluster_id, grain_type, "
               "grain_key, name, grain_hash, start_us, period_us) VALUES "
               "('c', $1, '', 'tick', 0, 1, 1), "
               "('c', $1, repeat('k', $2::int), 'tick', 0, 1, 1), "
               "('c', '', 'c', 'tick', 0, 1, 1)",
               {kAlarm, absl::StrCat(kMaxGrainKeyBytes + 1)})
          .status(),
      IsOk());
  EXPECT_THAT(Described(R::ReadAllOn(*db, "c")),
              UnorderedElementsAre(absl::StrCat(kAlarm, "/a tick 1 1"),
                                   absl::StrCat(kAlarm, "/b tick 2 2")));
  std::unique_ptr<PgPool> pool = StartedPool();
  ASSERT_NE(pool, nullptr);
  PostgresReminderTable table(pool.get(), "c");
  EXPECT_EQ(ReadAllNow(table).size(), 2u);
}

TEST_F(PostgresTest, TheGrainHashColumnHoldsWhatTheHashFunctionGave) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  std::unique_ptr<PgPool> pool = StartedPool();
  ASSERT_NE(pool, nullptr);
  // A uint64 ring position past INT64_MAX is stored bit-cast, negative.
  const int64_t high = absl::bit_cast<int64_t>(uint64_t{0xFEDCBA9876543210});
  PostgresReminderTable hashed(pool.get(), "hashed", [high](const GrainId& id) {
    return id.key() == "a" ? high : int64_t{42};
  });
  PostgresReminderTable unhashed(pool.get(), "unhashed");
  ASSERT_THAT(Flatten(hashed.Upsert(Reminder("a", "tick", 1, 1)).Get()),
              IsOk());
  ASSERT_THAT(Flatten(hashed.Upsert(Reminder("b", "tick", 1, 1)).Get()),
              IsOk());
  ASSERT_THAT(Flatten(unhashed.Upsert(Reminder("a", "tick", 1, 1)).Get()),
              IsOk());
  absl::StatusOr<PgResult> r = db->Exec(
      "SELECT cluster_id, grain_key, grain_hash FROM granary_reminders "
      "ORDER BY cluster_id, grain_key");
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->rows(), 3);
  EXPECT_EQ(r->Text(0, 1), "a");
  EXPECT_EQ(r->Int64(0, 2), high);
  EXPECT_EQ(r->Text(1, 1), "b");
  EXPECT_EQ(r->Int64(1, 2), 42);
  EXPECT_EQ(r->Text(2, 0), "unhashed");
  EXPECT_EQ(r->Int64(2, 2), 0);
}

// Upserts and removes started one after another, none awaited, complete in
// that order and leave the last one's outcome, though the pool has four
// connections.
TEST_F(PostgresTest, ReminderWritesStartedBackToBackCompleteInOrder) {
  ASSERT_NE(Migrated(), nullptr);
  std::unique_ptr<PgPool> pool = StartedPool();
  ASSERT_NE(pool, nullptr);
  PostgresReminderTable table(pool.get(), "c");
  constexpr int kRounds = 40;
  std::latch all_done(3 * kRounds);
  std::mutex mu;
  std::vector<int> completed;  // write numbers, in completion order
  std::atomic<int> failed{0};
  auto record = [&](int n) {
    return [&, n](absl::StatusOr<absl::Status> s) {
      if (!Flatten(std::move(s)).ok()) failed.fetch_add(1);
      {
        std::lock_guard<std::mutex> lock(mu);
        completed.push_back(n);
      }
      all_done.count_down();
    };
  };
  for (int round = 0; round < kRounds; ++round) {
    Detach(table.Upsert(Reminder("wake", "tick", round, 1)), record(3 * round));
    Detach(table.Remove(GrainId(kAlarm, "wake"), "tick"),
           record(3 * round + 1));
    Detach(table.Upsert(Reminder("wake", "tock", round, 1)),
           record(3 * round + 2));
  }
  all_done.wait();
  EXPECT_EQ(failed.load(), 0);
  std::vector<int> expected(3 * kRounds);
  for (int i = 0; i < 3 * kRounds; ++i) expected[i] = i;
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(completed, expected);
  }
  EXPECT_THAT(ReadAllNow(table), ElementsAre(absl::StrCat(kAlarm, "/wake tock ",
                                                          kRounds - 1, " 1")));
}

}  // namespace
}  // namespace granary::storage
