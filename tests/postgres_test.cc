// The PostgreSQL providers against a real PostgreSQL server of the test's
// own (tests/postgres_server.h, the fixture in tests/postgres_fixture.h):
// the schema's migrations, connection errors and the pool, the membership
// table's compare-and-swap under racing writers, and its heartbeats. Grain
// state and reminders are in tests/postgres_store_test.cc.
#include <stdlib.h>

#include <atomic>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
#include "storage/postgres/postgres_membership_table.h"
#include "storage/postgres/schema.h"
#include "tests/postgres_fixture.h"
#include "tests/postgres_server.h"

namespace granary::storage {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::IsOkAndHolds;
using ::granary::matchers::StatusIs;
using ::granary::testing::PostgresServer;
using ::granary::testing::PostgresTest;
using ::granary::testing::Race;
using ::granary::testing::RaceCounts;
using ::granary::testing::RaceWrite;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

v1::Member Member(int n, v1::MemberStatus status = v1::MEMBER_JOINING) {
  v1::Member m;
  m.set_address(absl::StrCat("127.0.0.1:", 11000 + n));
  m.set_generation(1000 + n);
  m.set_status(status);
  return m;
}

TEST_F(PostgresTest,
       MigratingAnEmptyDatabaseThenAgainAppliesEachMigrationOnce) {
  std::unique_ptr<PgConnection> db = Connect();
  ASSERT_NE(db, nullptr);
  EXPECT_THAT(CheckSchema(*db), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("granary db migrate")));
  absl::StatusOr<std::vector<int>> first = MigrateSchema(*db);
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_EQ(first->size(), Migrations().size());
  EXPECT_EQ(first->back(), LatestSchemaVersion());
  absl::StatusOr<std::vector<int>> second = MigrateSchema(*db);
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_THAT(*second, IsEmpty());
  EXPECT_THAT(CheckSchema(*db), IsOk());
  EXPECT_THAT(SchemaVersion(*db),
              ::granary::matchers::IsOkAndHolds(LatestSchemaVersion()));
}

TEST_F(PostgresTest, MigrationsRacingFromManyConnectionsApplyOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> applied{0}, failed{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      std::unique_ptr<PgConnection> db = Connect();
      if (db == nullptr) return;
      absl::StatusOr<std::vector<int>> r = MigrateSchema(*db);
      if (!r.ok()) {
        failed.fetch_add(1);
        ADD_FAILURE() << r.status();
        return;
      }
      applied.fetch_add(static_cast<int>(r->size()));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(applied.load(), static_cast<int>(Migrations().size()));
}

TEST_F(PostgresTest, ANewerSchemaIsRefusedByTheSiloAndByMigrate) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  ASSERT_THAT(
      db->Exec(
            "INSERT INTO granary_schema (version, name) VALUES ($1, 'future')",
            {absl::StrCat(LatestSchemaVersion() + 1)})
          .status(),
      IsOk());
  EXPECT_THAT(CheckSchema(*db), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("newer")));
  EXPECT_THAT(
      MigrateSchema(*db).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newer")));
}

TEST_F(PostgresTest, ADatabaseThatIsNotGranarysIsRefusedAndLeftAsItWas) {
  std::unique_ptr<PgConnection> db = Connect();
  ASSERT_NE(db, nullptr);
  // Someone else's table, by a name the schema needs.
  ASSERT_THAT(db->ExecScript("CREATE TABLE granary_members (id int);"
                             "INSERT INTO granary_members VALUES (7);"),
              IsOk());
  EXPECT_THAT(CheckSchema(*db), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("no Granary schema")));
  absl::StatusOr<std::vector<int>> migrated = MigrateSchema(*db);
  EXPECT_THAT(migrated.status(), Not(IsOk()));
  EXPECT_THAT(migrated.status().message(), HasSubstr("0001_initial"));
  // Rolled back whole: no schema table, the other table untouched.
  EXPECT_THAT(SchemaVersion(*db), ::granary::matchers::IsOkAndHolds(0));
  absl::StatusOr<PgResult> theirs = db->Exec("SELECT id FROM granary_members");
  ASSERT_THAT(theirs.status(), IsOk());
  EXPECT_EQ(theirs->Int64(0, 0), 7);
}

TEST_F(PostgresTest, BadConnectionStringsWrongPasswordsAndDeadServersAreTold) {
  EXPECT_THAT(
      PgConnection::Connect("host=127.0.0.1 port", absl::Seconds(5)).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("does not parse")));
  EXPECT_THAT(
      PgConnection::Connect("postgresql://[::1", absl::Seconds(5)).status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
  // An unquoted space in a password: libpq's complaint quotes the part
  // after it, which the message leaves out.
  absl::Status spaced =
      PgConnection::Connect("host=127.0.0.1 password=first secondhalf",
                            absl::Seconds(5))
          .status();
  EXPECT_THAT(spaced, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("does not parse")));
  EXPECT_THAT(spaced.message(), Not(HasSubstr("secondhalf")));
  EXPECT_THAT(spaced.message(), Not(HasSubstr("first")));
  const std::string wrong =
      absl::StrCat("host=127.0.0.1 port=", server()->port(),
                   " dbname=postgres user=postgres password=not-it");
  absl::Status refused =
      PgConnection::Connect(wrong, absl::Seconds(5)).status();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(refused.message(), Not(HasSubstr("not-it")));
  const std::string no_db = absl::StrCat(
      "host=127.0.0.1 port=", server()->port(),
      " dbname=nosuchdb user=postgres password=", PostgresServer::kPassword);
  EXPECT_THAT(PgConnection::Connect(no_db, absl::Seconds(5)).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nosuchdb")));
  // Nothing listens on port 1.
  EXPECT_THAT(
      PgConnection::Connect("host=127.0.0.1 port=1 dbname=x password=p",
                            absl::Seconds(5))
          .status(),
      StatusIs(absl::StatusCode::kUnavailable, Not(HasSubstr("password=p"))));
}

TEST_F(PostgresTest, MembershipWritesAreACompareAndSwapOnTheVersion) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  absl::StatusOr<v1::MembershipView> empty =
      PostgresMembershipTable::ReadOn(*db, "c1");
  ASSERT_THAT(empty.status(), IsOk());
  EXPECT_EQ(empty->version(), 0);
  EXPECT_EQ(empty->members_size(), 0);

  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", Member(1), 0),
              ::granary::matchers::IsOkAndHolds(1));
  // A writer that read version 0 is too late now.
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", Member(2), 0),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", Member(2), 1),
              ::granary::matchers::IsOkAndHolds(2));
  v1::Member active = Member(1, v1::MEMBER_ACTIVE);
  v1::Suspicion* vote = active.add_suspicions();
  vote->set_by("127.0.0.1:11002@1002");
  vote->set_at_unix_ms(absl::ToUnixMillis(absl::Now()));
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", active, 2),
              ::granary::matchers::IsOkAndHolds(3));
  // Backwards, malformed and oversized rows are refused and change nothing;
  // so are votes that do not count, and a death with too few of them.
  EXPECT_THAT(
      PostgresMembershipTable::WriteOn(*db, "c1", Member(1, v1::MEMBER_JOINING),
                                       3),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("back to")));
  v1::Member huge = Member(3);
  huge.set_address(std::string(100000, 'x') + ":1");
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", huge, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
  v1::Member no_status = Member(4);
  no_status.set_status(v1::MEMBER_STATUS_UNSPECIFIED);
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", no_status, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
  v1::Member forged = active;
  v1::Suspicion* ahead = forged.add_suspicions();
  ahead->set_by("127.0.0.1:11002@1002");
  ahead->set_at_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Hours(1)));
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", forged, 3),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  v1::Member wiped = active;
  wiped.clear_suspicions();
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", wiped, 3),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  v1::Member killed = Member(2, v1::MEMBER_DEAD);
  v1::Suspicion* one = killed.add_suspicions();
  one->set_by("127.0.0.1:11001@1001");
  one->set_at_unix_ms(absl::ToUnixMillis(absl::Now()));
  // With two members beating (1 and 5) that could vote on member 2, one
  // vote does not declare it dead.
  v1::Member third = Member(5);
  third.set_heartbeat_unix_ms(absl::ToUnixMillis(absl::Now()));
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", third, 3),
              ::granary::matchers::IsOkAndHolds(4));
  v1::Member beating = active;
  beating.set_heartbeat_unix_ms(absl::ToUnixMillis(absl::Now()));
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", beating, 4),
              ::granary::matchers::IsOkAndHolds(5));
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", killed, 5),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("with 2 votes")));

  absl::StatusOr<v1::MembershipView> view =
      PostgresMembershipTable::ReadOn(*db, "c1");
  ASSERT_THAT(view.status(), IsOk());
  EXPECT_EQ(view->version(), 5);
  ASSERT_EQ(view->members_size(), 3);
  EXPECT_EQ(view->members(0).status(), v1::MEMBER_ACTIVE);
  ASSERT_EQ(view->members(0).suspicions_size(), 1);
  EXPECT_EQ(view->members(0).suspicions(0).by(), "127.0.0.1:11002@1002");

  // Another cluster in the same database is a table of its own.
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c2", Member(9), 0),
              ::granary::matchers::IsOkAndHolds(1));
  absl::StatusOr<v1::MembershipView> other =
      PostgresMembershipTable::ReadOn(*db, "c2");
  ASSERT_THAT(other.status(), IsOk());
  ASSERT_EQ(other->members_size(), 1);
  EXPECT_EQ(other->members(0).address(), Member(9).address());
}

// Dead rows older than the retention go with the next write; newer ones,
// and live rows however old, stay.
TEST_F(PostgresTest, DeadMembersPastTheRetentionAreDeletedByTheNextWrite) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  using T = PostgresMembershipTable;
  ASSERT_THAT(T::WriteOn(*db, "c", Member(1, v1::MEMBER_DEAD), 0), IsOk());
  ASSERT_THAT(T::WriteOn(*db, "c", Member(2, v1::MEMBER_DEAD), 1), IsOk());
  ASSERT_THAT(T::WriteOn(*db, "c", Member(3, v1::MEMBER_ACTIVE), 2), IsOk());
  // Silos 1 and 3 changed two days ago (3 is alive however old).
  ASSERT_THAT(
      db->Exec(
            "UPDATE granary_members SET updated_at = now() - interval '2 days' "
            "WHERE address IN ($1, $2)",
            {Member(1).address(), Member(3).address()})
          .status(),
      IsOk());
  ASSERT_THAT(T::WriteOn(*db, "c", Member(4), 3, absl::Hours(24)), IsOk());
  absl::StatusOr<v1::MembershipView> view = T::ReadOn(*db, "c");
  ASSERT_THAT(view.status(), IsOk());
  std::vector<std::string> left;
  for (const v1::Member& m : view->members()) left.push_back(m.address());
  EXPECT_THAT(left, ElementsAre(Member(2).address(), Member(3).address(),
                                Member(4).address()));
  EXPECT_EQ(view->version(), 4);
}

// Writers racing through the pool: in each round every writer reads the
// table, then all write at the version they read at once. Exactly one wins
// each round, the others are ABORTED, and the table ends at the number of
// rounds.
TEST_F(PostgresTest, RacingMembershipWritersWinEachVersionOnce) {
  ASSERT_NE(Migrated(), nullptr);
  std::unique_ptr<PgPool> started = StartedPool();
  ASSERT_NE(started, nullptr);
  PostgresMembershipTable table(started.get(), "race");
  constexpr int kWriters = 4, kRounds = 20;
  std::mutex mu;
  std::map<int64_t, int> winners;  // version -> writers that got it
  const RaceCounts counts =
      Race(kWriters, kRounds, [&](int w, int round) -> RaceWrite {
        absl::StatusOr<absl::StatusOr<v1::MembershipView>> view =
            table.Read().Get();
        if (!view.ok() || !view->ok())
          return [] { return absl::StatusCode::kUnknown; };
        return [&, w, round, version = (*view)->version()] {
          v1::Member me = Member(w);
          me.set_activations(round);
          absl::StatusOr<int64_t> r = Flatten(table.Write(me, version).Get());
          if (r.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            ++winners[*r];
          }
          return r.status().code();
        };
      });
  EXPECT_EQ(counts.other, 0);
  EXPECT_EQ(winners.size(), static_cast<size_t>(kRounds));
  for (const auto& [version, n] : winners)
    EXPECT_EQ(n, 1) << "version " << version;
  EXPECT_EQ(counts.aborted, kRounds * (kWriters - 1));
  absl::StatusOr<absl::StatusOr<v1::MembershipView>> final_view =
      table.Read().Get();
  ASSERT_TRUE(final_view.ok() && final_view->ok());
  EXPECT_EQ((*final_view)->version(), kRounds);
}

TEST_F(PostgresTest, APoolThatIsStoppedOrFullRefusesWork) {
  PgPoolOptions options;
  options.conninfo = conninfo_;
  options.connections = 0;
  EXPECT_THAT(ValidatePgPoolOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument));
  options.connections = 1;
  options.conninfo = "host=127.0.0.1 port";
  EXPECT_THAT(PgPool(options).Start(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  options.conninfo = conninfo_;
  PgPool pool(options);
  auto one = [](PgConnection& db) -> absl::StatusOr<int64_t> {
    absl::StatusOr<PgResult> r = db.Exec("SELECT 1");
    if (!r.ok()) return r.status();
    return r->Int64(0, 0);
  };
  absl::StatusOr<absl::StatusOr<int64_t>> before = pool.Run<int64_t>(one).Get();
  ASSERT_TRUE(before.ok());
  EXPECT_THAT(*before, StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT(pool.Start(), IsOk());
  absl::StatusOr<absl::StatusOr<int64_t>> during = pool.Run<int64_t>(one).Get();
  ASSERT_TRUE(during.ok());
  EXPECT_THAT(*during, ::granary::matchers::IsOkAndHolds(1));
  pool.Stop();
  pool.Stop();  // idempotent
  absl::StatusOr<absl::StatusOr<int64_t>> after = pool.Run<int64_t>(one).Get();
  ASSERT_TRUE(after.ok());
  EXPECT_THAT(*after, StatusIs(absl::StatusCode::kUnavailable));
}

// The server restarts (pg_ctl stop -m fast, start) while every pooled
// connection sits idle: each finds out it was dropped before a statement
// runs on it, and is replaced, so not one of the next 100 statements fails.
TEST_F(PostgresTest, APoolRecoversFromAServerRestartWithoutFailingACall) {
  std::unique_ptr<PgPool> pool = StartedPool();  // four connections
  // Every connection in use once: four jobs that overlap.
  std::latch all_in(4);
  std::atomic<int> warmed{0};
  for (int i = 0; i < 4; ++i) {
    pool->Submit([&](absl::StatusOr<PgConnection*> db) {
      if (db.ok() && (*db)->Exec("SELECT pg_sleep(0.3)").ok())
        warmed.fetch_add(1);
      all_in.count_down();
    });
  }
  all_in.wait();
  ASSERT_EQ(warmed.load(), 4);
  ASSERT_THAT(server()->Restart(), IsOk());
  int failed = 0;
  std::string first;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<absl::StatusOr<int64_t>> r =
        pool->Run<int64_t>([](PgConnection& db) -> absl::StatusOr<int64_t> {
              absl::StatusOr<PgResult> one = db.Exec("SELECT 1");
              if (!one.ok()) return one.status();
              return one->Int64(0, 0);
            })
            .Get();
    if (!r.ok() || !r->ok()) {
      if (failed++ == 0) first = (r.ok() ? r->status() : r.status()).ToString();
    }
  }
  EXPECT_EQ(failed, 0) << first;
}

// --- membership heartbeats --------------------------------------------------

TEST_F(PostgresTest, AHeartbeatChangesItsRowButNotTheVersion) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  using T = PostgresMembershipTable;
  v1::Member active = Member(1, v1::MEMBER_ACTIVE);
  active.set_heartbeat_unix_ms(1000);
  active.set_activations(3);
  ASSERT_THAT(T::WriteOn(*db, "c", active, 0), IsOkAndHolds(1));
  // Only the heartbeat, the activations and the load of the member given
  // count.
  v1::Member beat = Member(1, v1::MEMBER_JOINING);
  beat.set_heartbeat_unix_ms(2000);
  beat.set_activations(17);
  beat.mutable_load()->set_cpu_permille(1001);  // malformed: refused
  EXPECT_THAT(T::HeartbeatOn(*db, "c", beat),
              StatusIs(absl::StatusCode::kInvalidArgument));
  beat.mutable_load()->set_cpu_permille(420);
  beat.mutable_load()->set_memory_bytes(64 << 20);
  beat.mutable_load()->set_memory_limit_bytes(int64_t{4} << 30);
  EXPECT_THAT(T::HeartbeatOn(*db, "c", beat), IsOk());
  absl::StatusOr<v1::MembershipView> view = T::ReadOn(*db, "c");
  ASSERT_THAT(view.status(), IsOk());
  EXPECT_EQ(view->version(), 1);
  ASSERT_EQ(view->members_size(), 1);
  EXPECT_EQ(view->members(0).heartbeat_unix_ms(), 2000);
  EXPECT_EQ(view->members(0).activations(), 17);
  EXPECT_EQ(view->members(0).load().cpu_permille(), 420u);
  EXPECT_EQ(view->members(0).load().memory_bytes(), 64 << 20);
  EXPECT_EQ(view->members(0).load().memory_limit_bytes(), int64_t{4} << 30);
  EXPECT_EQ(view->members(0).status(), v1::MEMBER_ACTIVE);

  // The same through the pool.
  std::unique_ptr<PgPool> pool = StartedPool();
  ASSERT_NE(pool, nullptr);
  PostgresMembershipTable table(pool.get(), "c");
  beat.set_heartbeat_unix_ms(3000);
  EXPECT_THAT(Flatten(table.Heartbeat(beat).Get()), IsOk());
  absl::StatusOr<v1::MembershipView> seen = Flatten(table.Read().Get());
  ASSERT_THAT(seen.status(), IsOk());
  EXPECT_EQ(seen->version(), 1);
  ASSERT_EQ(seen->members_size(), 1);
  EXPECT_EQ(seen->members(0).heartbeat_unix_ms(), 3000);
  // Writers that read version 1 before the heartbeats still write at it.
  EXPECT_THAT(T::WriteOn(*db, "c", Member(2), 1), IsOkAndHolds(2));
}

// Every membership write notifies the silos listening on the table's
// channel with its cluster id, once it commits; a write that fails, and a
// heartbeat, notify nobody.
TEST_F(PostgresTest, MembershipWritesNotifyListenersWithTheirCluster) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  std::unique_ptr<PgConnection> listener = Connect();
  ASSERT_NE(listener, nullptr);
  EXPECT_THAT(listener->Listen("no such; channel"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(listener->Listen(""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(listener->Listen(kMembershipChannel), IsOk());
  absl::StatusOr<std::vector<std::string>> none =
      listener->AwaitNotifications(absl::Milliseconds(50));
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_THAT(*none, IsEmpty());

  using T = PostgresMembershipTable;
  v1::Member active = Member(1, v1::MEMBER_ACTIVE);
  ASSERT_THAT(T::WriteOn(*db, "c", active, 0), IsOkAndHolds(1));
  absl::StatusOr<std::vector<std::string>> got =
      listener->AwaitNotifications(absl::Seconds(10));
  ASSERT_THAT(got.status(), IsOk());
  EXPECT_THAT(*got, ElementsAre("c"));
  // A write at a stale version commits nothing, and a heartbeat moves no
  // version: neither notifies.
  EXPECT_THAT(T::WriteOn(*db, "c", Member(2), 0),
              StatusIs(absl::StatusCode::kAborted));
  active.set_heartbeat_unix_ms(5000);
  ASSERT_THAT(T::HeartbeatOn(*db, "c", active), IsOk());
  none = listener->AwaitNotifications(absl::Milliseconds(300));
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_THAT(*none, IsEmpty());
  // Another cluster's write names that cluster.
  ASSERT_THAT(T::WriteOn(*db, "other", Member(3), 0), IsOkAndHolds(1));
  got = listener->AwaitNotifications(absl::Seconds(10));
  ASSERT_THAT(got.status(), IsOk());
  EXPECT_THAT(*got, ElementsAre("other"));
}

TEST_F(PostgresTest, AHeartbeatOfADeadOrMissingMemberIsNotFound) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  using T = PostgresMembershipTable;
  v1::Member dead = Member(1, v1::MEMBER_ACTIVE);
  dead.set_heartbeat_unix_ms(1000);
  ASSERT_THAT(T::WriteOn(*db, "c", dead, 0), IsOk());
  dead.set_status(v1::MEMBER_DEAD);
  ASSERT_THAT(T::WriteOn(*db, "c", dead, 1), IsOkAndHolds(2));

  v1::Member beat = Member(1, v1::MEMBER_ACTIVE);
  beat.set_heartbeat_unix_ms(9000);
  EXPECT_THAT(T::HeartbeatOn(*db, "c", beat),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("not live")));
  absl::StatusOr<v1::MembershipView> view = T::ReadOn(*db, "c");
  ASSERT_THAT(view.status(), IsOk());
  EXPECT_EQ(view->version(), 2);
  ASSERT_EQ(view->members_size(), 1);
  EXPECT_EQ(view->members(0).status(), v1::MEMBER_DEAD);
  EXPECT_EQ(view->members(0).heartbeat_unix_ms(), 1000);

  // No row: another silo, another generation, another cluster.
  EXPECT_THAT(T::HeartbeatOn(*db, "c", Member(5)),
              StatusIs(absl::StatusCode::kNotFound));
  v1::Member next_generation = beat;
  next_generation.set_generation(beat.generation() + 1);
  EXPECT_THAT(T::HeartbeatOn(*db, "c", next_generation),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(T::HeartbeatOn(*db, "other", beat),
              StatusIs(absl::StatusCode::kNotFound));
  std::unique_ptr<PgPool> pool = StartedPool();
  ASSERT_NE(pool, nullptr);
  PostgresMembershipTable table(pool.get(), "c");
  EXPECT_THAT(Flatten(table.Heartbeat(Member(5)).Get()),
              StatusIs(absl::StatusCode::kNotFound));
}

// A silo heartbeats with the row as it last read it, without the votes
// cast against it since: the votes stay, whether the vote committed before
// the heartbeat or while the heartbeat waited for the row.
TEST_F(PostgresTest, AHeartbeatKeepsTheSuspicionsOfAConcurrentVote) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  using T = PostgresMembershipTable;
  const v1::Member read_by_silo = Member(1, v1::MEMBER_ACTIVE);
  ASSERT_THAT(T::WriteOn(*db, "c", read_by_silo, 0), IsOk());
  ASSERT_THAT(T::WriteOn(*db, "c", Member(2), 1), IsOk());  // the voter
  v1::Member voted = read_by_silo;
  v1::Suspicion* vote = voted.add_suspicions();
  vote->set_by(absl::StrCat(Member(2).address(), "@", Member(2).generation()));
  vote->set_at_unix_ms(absl::ToUnixMillis(absl::Now()));
  ASSERT_THAT(T::WriteOn(*db, "c", voted, 2), IsOkAndHolds(3));
  v1::Member beat = read_by_silo;
  beat.set_heartbeat_unix_ms(5000);
  EXPECT_THAT(T::HeartbeatOn(*db, "c", beat), IsOk());
  absl::StatusOr<v1::MembershipView> view = T::ReadOn(*db, "c");
  ASSERT_THAT(view.status(), IsOk());
  EXPECT_EQ(view->version(), 3);
  ASSERT_EQ(view->members_size(), 2);
  EXPECT_EQ(view->members(0).heartbeat_unix_ms(), 5000);
  ASSERT_EQ(view->members(0).suspicions_size(), 1);
  EXPECT_EQ(view->members(0).suspicions(0).by(), vote->by());

  // A second vote holds the row, uncommitted, while a heartbeat comes.
  std::unique_ptr<PgConnection> voter = Connect();
  ASSERT_NE(voter, nullptr);
  v1::Member voted_twice = voted;
  voted_twice.add_suspicions()->set_by("127.0.0.1:11003@1003");
  ASSERT_THAT(voter->Exec("BEGIN").status(), IsOk());
  ASSERT_THAT(voter
                  ->Exec("UPDATE granary_members SET member = $1 "
                         "WHERE cluster_id = 'c' AND address = $2",
                         {PgParam::Bytes(voted_twice.SerializeAsString()),
                          voted_twice.address()})
                  .status(),
              IsOk());
  beat.set_heartbeat_unix_ms(6000);
  absl::Status beaten = absl::UnknownError("not run");
  std::thread heartbeat([&] {
    std::unique_ptr<PgConnection> silo = Connect();
    if (silo != nullptr) beaten = T::HeartbeatOn(*silo, "c", beat);
  });
  // The heartbeat waits for the voter's row lock (watched, not slept on).
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  int64_t waiting = 0;
  while (waiting == 0 && absl::Now() < give_up) {
    absl::StatusOr<PgResult> locks = db->Exec(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a "
        "ON a.pid = l.pid WHERE NOT l.granted "
        "AND a.datname = current_database()");
    if (!locks.ok()) {
      ADD_FAILURE() << locks.status();
      break;
    }
    waiting = locks->Int64(0, 0);
    if (waiting == 0) std::this_thread::yield();
  }
  EXPECT_GT(waiting, 0) << "the heartbeat never waited for the row";
  EXPECT_THAT(voter->Exec("COMMIT").status(), IsOk());
  heartbeat.join();
  EXPECT_THAT(beaten, IsOk());
  view = T::ReadOn(*db, "c");
  ASSERT_THAT(view.status(), IsOk());
  ASSERT_EQ(view->members_size(), 2);
  EXPECT_EQ(view->members(0).heartbeat_unix_ms(), 6000);
  EXPECT_EQ(view->members(0).suspicions_size(), 2);
}

}  // namespace
}  // namespace granary::storage
