#include "bench/postgres_floor.h"

#include "gtest/gtest.h"

namespace granary::bench {
namespace {

TEST(ParsePgbenchLogTest, ReadsLatenciesAndTheSpan) {
  // client_id transaction_no time script_no time_epoch time_us
  absl::StatusOr<PgbenchLog> log = ParsePgbenchLog(
      "0 1 7005 0 1796224879 534965\n"
      "0 2 3936 0 1796224879 538929\n"
      "0 3 3963 0 1796224879 542905\n");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->latencies_ns,
            (std::vector<int64_t>{7005000, 3936000, 3963000}));
  EXPECT_EQ(log->failed, 0);
  EXPECT_EQ(log->first_start_us, 1796224879534965 - 7005);
  EXPECT_EQ(log->last_end_us, 1796224879542905);
}

TEST(ParsePgbenchLogTest, CountsFailedTransactions) {
  absl::StatusOr<PgbenchLog> log = ParsePgbenchLog(
      "0 1 2000 0 1796224879 100000\n"
      "0 2 failed 0 1796224879 200000 serialization\n");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->latencies_ns.size(), 1u);
  EXPECT_EQ(log->failed, 1);
  EXPECT_EQ(log->last_end_us, 1796224879200000);
}

TEST(ParsePgbenchLogTest, AnEmptyLogHasNoSamples) {
  absl::StatusOr<PgbenchLog> log = ParsePgbenchLog("\n");
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_TRUE(log->latencies_ns.empty());
}

TEST(ParsePgbenchLogTest, RejectsALineThatDoesNotParse) {
  absl::StatusOr<PgbenchLog> log =
      ParsePgbenchLog("0 1 2000 0 1796224879 100000\nnot a log line\n");
  EXPECT_EQ(log.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(log.status().message().find("line 2"), absl::string_view::npos);
  log = ParsePgbenchLog("0 1 soon 0 1796224879 100000\n");
  EXPECT_EQ(log.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace granary::bench
