#include "bench/stats.h"

#include "gtest/gtest.h"

namespace granary::bench {
namespace {

TEST(StatsTest, NearestRank) {
  std::vector<int64_t> v;
  for (int i = 1; i <= 100; ++i) v.push_back(101 - i);  // unsorted
  EXPECT_EQ(NearestRank(v, 0.50), 50);
  EXPECT_EQ(NearestRank(v, 0.99), 99);
  EXPECT_EQ(NearestRank(v, 1.0), 100);
  EXPECT_EQ(NearestRank({7}, 0.99), 7);
  EXPECT_EQ(NearestRank({}, 0.5), 0);
  EXPECT_EQ(NearestRank({1, 2, 3}, 0.0), 1);
}

TEST(StatsTest, Summarize) {
  RateSummary s = Summarize({10, 20, 30});
  EXPECT_DOUBLE_EQ(s.mean, 20);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 30);
  EXPECT_DOUBLE_EQ(s.stddev, 10);
}

TEST(StatsTest, ResidentBytesIsPositive) { EXPECT_GT(ResidentBytes(), 0); }

}  // namespace
}  // namespace granary::bench
