#include "core/process_load.h"

#include <chrono>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::Optional;

TEST(ParseCpuMaxTest, QuotaOverPeriod) {
  EXPECT_THAT(ParseCpuMax("150000 100000\n"), Optional(1.5));
  EXPECT_THAT(ParseCpuMax("50000 100000"), Optional(0.5));
}

TEST(ParseCpuMaxTest, NoLimitOrMalformedIsNullopt) {
  EXPECT_EQ(ParseCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(ParseCpuMax(""), std::nullopt);
  EXPECT_EQ(ParseCpuMax("100000"), std::nullopt);
  EXPECT_EQ(ParseCpuMax("-5 100000"), std::nullopt);
  EXPECT_EQ(ParseCpuMax("5 0"), std::nullopt);
  EXPECT_EQ(ParseCpuMax("1 2 3"), std::nullopt);
  EXPECT_EQ(ParseCpuMax("99999999999999999999999 1"), std::nullopt);
}

TEST(ParseMemoryMaxTest, BytesOrNullopt) {
  EXPECT_THAT(ParseMemoryMax("536870912\n"), Optional(int64_t{536870912}));
  EXPECT_EQ(ParseMemoryMax("max\n"), std::nullopt);
  EXPECT_EQ(ParseMemoryMax(""), std::nullopt);
  EXPECT_EQ(ParseMemoryMax("0"), std::nullopt);
  EXPECT_EQ(ParseMemoryMax("12k"), std::nullopt);
}

TEST(ParseCgroupPathTest, FindsTheV2Line) {
  EXPECT_THAT(ParseCgroupPath("0::/system.slice/granary.service\n"),
              Optional(std::string("/system.slice/granary.service")));
  EXPECT_THAT(ParseCgroupPath("12:cpu,cpuacct:/x\n0::/\n"),
              Optional(std::string("/")));
  // cgroup v1 only, or garbage.
  EXPECT_EQ(ParseCgroupPath("12:cpu,cpuacct:/x\n4:memory:/x\n"), std::nullopt);
  EXPECT_EQ(ParseCgroupPath(""), std::nullopt);
  EXPECT_EQ(ParseCgroupPath("0::relative"), std::nullopt);
}

TEST(ParsePressureTest, ReadsSomeAvg10) {
  EXPECT_EQ(ParsePressureSome10("some avg10=43.49 avg60=17.44 avg300=4.92 "
                                "total=17316921\n"
                                "full avg10=0.00 avg60=0.00 avg300=0.00 "
                                "total=0\n"),
            43.49);
  EXPECT_EQ(ParsePressureSome10("full avg10=1.00\nsome avg10=0.00 avg60=1"),
            0.0);
}

TEST(ParsePressureTest, MalformedOrAbsentIsNullopt) {
  EXPECT_EQ(ParsePressureSome10(""), std::nullopt);
  EXPECT_EQ(ParsePressureSome10("full avg10=3.00"), std::nullopt);
  EXPECT_EQ(ParsePressureSome10("some avg10=abc avg60=1.0"), std::nullopt);
  EXPECT_EQ(ParsePressureSome10("some avg10=150.0"), std::nullopt);
  EXPECT_EQ(ParsePressureSome10("some avg10=-1"), std::nullopt);
  EXPECT_EQ(ParsePressureSome10("some avg60=3.0"), std::nullopt);
  // Whatever the kernel says, the figure read is within 0..100 or absent.
  const std::optional<double> now = CpuPressure();
  if (now.has_value()) {
    EXPECT_GE(*now, 0);
    EXPECT_LE(*now, 100);
  }
}

TEST(LoadMeterTest, ReportsMemoryAndABoundedCpuFigure) {
  LoadMeter meter;
  // Keep one core busy for a while: the figure must be above zero.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  ProcessLoad load = meter.Sample();
  EXPECT_GT(load.cpu_permille, 0u);
  EXPECT_LE(load.cpu_permille, 1000u);
  EXPECT_GT(load.memory_bytes, 0);
  EXPECT_GT(load.memory_limit_bytes, 0);
  EXPECT_GT(UsableCores(), 0.0);
  // A second sample right away still answers within bounds.
  EXPECT_LE(meter.Sample().cpu_permille, 1000u);
}

}  // namespace
}  // namespace granary
