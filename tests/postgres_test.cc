// The PostgreSQL providers against a real PostgreSQL server of the test's
// own (tests/postgres_server.h): the schema's migrations, connection
// errors, the membership table's compare-and-swap under racing writers and
// its heartbeats, grain state, and reminders.
#include <atomic>
#include <barrier>
#include <functional>
#include <iostream>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/casts.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/status.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
#include "storage/postgres/postgres_grain_storage.h"
#include "storage/postgres/postgres_membership_table.h"
#include "storage/postgres/postgres_reminder_table.h"
#include "storage/postgres/schema.h"
#include "tests/postgres_server.h"

namespace granary::storage {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::IsOkAndHolds;
using ::granary::matchers::StatusIs;
using ::granary::testing::PostgresServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

class PostgresTest : public ::granary::testing::PostgresSuite {
 protected:
  void SetUp() override {
    PostgresSuite::SetUp();
    if (HasFatalFailure()) return;
    const std::string name =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    conninfo_ = server()->CreateDatabase(absl::AsciiStrToLower(name));
  }
  std::unique_ptr<PgConnection> Connect() {
    absl::StatusOr<std::unique_ptr<PgConnection>> db =
        PgConnection::Connect(conninfo_, absl::Seconds(10));
    EXPECT_THAT(db.status(), IsOk());
    return db.ok() ? *std::move(db) : nullptr;
  }
  // A pool of four connections to the test's database, started.
  std::unique_ptr<PgPool> StartedPool() {
    PgPoolOptions options;
    options.conninfo = conninfo_;
    options.connections = 4;
    auto pool = std::make_unique<PgPool>(options);
    absl::Status started = pool->Start();
    EXPECT_THAT(started, IsOk());
    return started.ok() ? std::move(pool) : nullptr;
  }
  std::unique_ptr<PgConnection> Migrated() {
    std::unique_ptr<PgConnection> db = Connect();
    if (db != nullptr) {
      EXPECT_THAT(MigrateSchema(*db).status(), IsOk());
    }
    return db;
  }

  std::string conninfo_;
};

// A race in rounds: in each, every one of `writers` threads runs its read
// (`prepare(writer, round)`), and once all have read, the write it returned.
// The writes' outcomes are counted: OK, ABORTED, anything else.
using RaceWrite = std::function<absl::StatusCode()>;
struct RaceCounts {
  int won = 0, aborted = 0, other = 0;
};
RaceCounts Race(
    int writers, int rounds,
    const std::function<RaceWrite(int writer, int round)>& prepare) {
  std::barrier read_done(writers), round_done(writers);
  std::atomic<int> won{0}, aborted{0}, other{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < rounds; ++round) {
        RaceWrite write = prepare(w, round);
        read_done.arrive_and_wait();  // nobody writes before all have read
        const absl::StatusCode code = write();
        if (code == absl::StatusCode::kOk) {
          won.fetch_add(1);
        } else if (code == absl::StatusCode::kAborted) {
          aborted.fetch_add(1);
        } else {
          other.fetch_add(1);
        }
        round_done.arrive_and_wait();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return RaceCounts{won.load(), aborted.load(), other.load()};
}

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

TEST(SchemaVersionTest, AnOlderSchemaNamesTheMigrateCommand) {
  EXPECT_THAT(CheckSchemaVersion(1, 2),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("granary db migrate")));
  EXPECT_THAT(CheckSchemaVersion(0, 2),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("no Granary schema")));
  EXPECT_THAT(
      CheckSchemaVersion(3, 2),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("newer")));
  EXPECT_THAT(CheckSchemaVersion(2, 2), IsOk());
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

TEST(ConninfoTest, TheRedactedFormHasNoPassword) {
  EXPECT_EQ(RedactConninfo("host=db port=5432 dbname=g user=u password=s3cret"),
            "user=u dbname=g host=db port=5432");
  const std::string uri =
      RedactConninfo("postgresql://u:s3cret@db:5433/g?sslmode=verify-full");
  EXPECT_THAT(uri, Not(HasSubstr("s3cret")));
  EXPECT_THAT(uri, HasSubstr("host=db"));
  EXPECT_THAT(uri, HasSubstr("sslmode=verify-full"));
  EXPECT_EQ(RedactConninfo("host="), "(libpq defaults)");
  EXPECT_THAT(RedactConninfo("garbage ==="), Not(HasSubstr("garbage")));
}

TEST(ClusterIdTest, OnlyShortPlainNamesAreClusterIds) {
  EXPECT_THAT(ValidateClusterId("prod-eu.1_a"), IsOk());
  EXPECT_THAT(ValidateClusterId(""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateClusterId(std::string(kMaxClusterIdBytes + 1, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateClusterId("a'; DROP TABLE x"),
              StatusIs(absl::StatusCode::kInvalidArgument));
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
  v1::Member active = Member(1, v1::MEMBER_ACTIVE);
  v1::Suspicion* vote = active.add_suspicions();
  vote->set_by("127.0.0.1:11002@1002");
  vote->set_at_unix_ms(123);
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", active, 1),
              ::granary::matchers::IsOkAndHolds(2));
  // Backwards, malformed and oversized rows are refused and change nothing.
  EXPECT_THAT(
      PostgresMembershipTable::WriteOn(*db, "c1", Member(1, v1::MEMBER_JOINING),
                                       2),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("back to")));
  v1::Member huge = Member(3);
  huge.set_address(std::string(100000, 'x') + ":1");
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", huge, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  v1::Member no_status = Member(4);
  no_status.set_status(v1::MEMBER_STATUS_UNSPECIFIED);
  EXPECT_THAT(PostgresMembershipTable::WriteOn(*db, "c1", no_status, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));

  absl::StatusOr<v1::MembershipView> view =
      PostgresMembershipTable::ReadOn(*db, "c1");
  ASSERT_THAT(view.status(), IsOk());
  EXPECT_EQ(view->version(), 2);
  ASSERT_EQ(view->members_size(), 1);
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

// --- membership heartbeats --------------------------------------------------

TEST_F(PostgresTest, AHeartbeatChangesItsRowButNotTheVersion) {
  std::unique_ptr<PgConnection> db = Migrated();
  ASSERT_NE(db, nullptr);
  using T = PostgresMembershipTable;
  v1::Member active = Member(1, v1::MEMBER_ACTIVE);
  active.set_heartbeat_unix_ms(1000);
  active.set_activations(3);
  ASSERT_THAT(T::WriteOn(*db, "c", active, 0), IsOkAndHolds(1));
  // Only the heartbeat and the activations of the member given count.
  v1::Member beat = Member(1, v1::MEMBER_JOINING);
  beat.set_heartbeat_unix_ms(2000);
  beat.set_activations(17);
  EXPECT_THAT(T::HeartbeatOn(*db, "c", beat), IsOk());
  absl::StatusOr<v1::MembershipView> view = T::ReadOn(*db, "c");
  ASSERT_THAT(view.status(), IsOk());
  EXPECT_EQ(view->version(), 1);
  ASSERT_EQ(view->members_size(), 1);
  EXPECT_EQ(view->members(0).heartbeat_unix_ms(), 2000);
  EXPECT_EQ(view->members(0).activations(), 17);
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
  v1::Member voted = read_by_silo;
  v1::Suspicion* vote = voted.add_suspicions();
  vote->set_by(absl::StrCat(Member(2).address(), "@", Member(2).generation()));
  vote->set_at_unix_ms(500);
  ASSERT_THAT(T::WriteOn(*db, "c", voted, 1), IsOkAndHolds(2));
  v1::Member beat = read_by_silo;
  beat.set_heartbeat_unix_ms(5000);
  EXPECT_THAT(T::HeartbeatOn(*db, "c", beat), IsOk());
  absl::StatusOr<v1::MembershipView> view = T::ReadOn(*db, "c");
  ASSERT_THAT(view.status(), IsOk());
  EXPECT_EQ(view->version(), 2);
  ASSERT_EQ(view->members_size(), 1);
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
  ASSERT_EQ(view->members_size(), 1);
  EXPECT_EQ(view->members(0).heartbeat_unix_ms(), 6000);
  EXPECT_EQ(view->members(0).suspicions_size(), 2);
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
