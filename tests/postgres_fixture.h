// File: tests/postgres_fixture.h
// -----------------------------------------------------------------------------
// What the PostgreSQL provider tests (tests/postgres_test.cc,
// tests/postgres_store_test.cc) share: `PostgresTest`, a suite on one
// throwaway server (tests/postgres_server.h) that gives each test a database
// of its own, named after the test, and `Race`, writers racing in rounds.
//
//   using ::granary::testing::PostgresTest;
//   TEST_F(PostgresTest, X) {
//     std::unique_ptr<PgConnection> db = Migrated();  // schema applied
//     std::unique_ptr<PgPool> pool = StartedPool();   // four connections
//     ...
//   }
//
// Threading: the fixture's helpers may be called from any thread of the
// test (Connect is, by the racing tests); each returns a connection or pool
// of its own.
#pragma once

#include <atomic>
#include <barrier>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/time/time.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
#include "storage/postgres/schema.h"
#include "tests/postgres_server.h"

namespace granary::testing {

class PostgresTest : public PostgresSuite {
 protected:
  void SetUp() override {
    PostgresSuite::SetUp();
    if (HasFatalFailure()) return;
    const std::string name =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    conninfo_ = server()->CreateDatabase(absl::AsciiStrToLower(name));
  }
  std::unique_ptr<storage::PgConnection> Connect() {
    absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
        storage::PgConnection::Connect(conninfo_, absl::Seconds(10));
    EXPECT_THAT(db.status(), ::granary::matchers::IsOk());
    return db.ok() ? *std::move(db) : nullptr;
  }
  // A pool of four connections to the test's database, started.
  std::unique_ptr<storage::PgPool> StartedPool() {
    storage::PgPoolOptions options;
    options.conninfo = conninfo_;
    options.connections = 4;
    auto pool = std::make_unique<storage::PgPool>(options);
    absl::Status started = pool->Start();
    EXPECT_THAT(started, ::granary::matchers::IsOk());
    return started.ok() ? std::move(pool) : nullptr;
  }
  std::unique_ptr<storage::PgConnection> Migrated() {
    std::unique_ptr<storage::PgConnection> db = Connect();
    if (db != nullptr) {
      EXPECT_THAT(storage::MigrateSchema(*db).status(),
                  ::granary::matchers::IsOk());
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
inline RaceCounts Race(
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

}  // namespace granary::testing
