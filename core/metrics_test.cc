// The metrics registry: exposition text of each type, label escaping,
// histogram buckets, callbacks, concurrent updates, and programming errors
// (bad names, wrong label counts, duplicates) refused.
#include "core/metrics.h"

#include <cmath>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary::metrics {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, CountersGaugesAndCallbacksRenderInTheTextFormat) {
  Registry r;
  auto& calls = r.AddCounter("t_calls_total", "Calls.\nSecond line \\.",
                             {"type", "method"});
  calls.WithLabels({"Counter", "Add"})->Inc(3);
  calls.WithLabels({"Counter", "Add"})->Inc();
  calls.WithLabels({"we\"ird\\", "new\nline"})->Inc();
  r.AddGauge("t_depth", "Depth.", {}).WithLabels({})->Set(2.5);
  r.AddCallback("t_open", "Open things.", Type::kGauge, {"kind"}, [] {
    return Samples{{{"b"}, 2}, {{"a"}, 1}};
  });
  const std::string text = r.Render();
  EXPECT_EQ(text,
            "# HELP t_calls_total Calls.\\nSecond line \\\\.\n"
            "# TYPE t_calls_total counter\n"
            "t_calls_total{type=\"Counter\",method=\"Add\"} 4\n"
            "t_calls_total{type=\"we\\\"ird\\\\\",method=\"new\\nline\"} 1\n"
            "# HELP t_depth Depth.\n"
            "# TYPE t_depth gauge\n"
            "t_depth 2.5\n"
            "# HELP t_open Open things.\n"
            "# TYPE t_open gauge\n"
            "t_open{kind=\"a\"} 1\n"
            "t_open{kind=\"b\"} 2\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry r;
  Histogram* h =
      r.AddHistogram("t_seconds", "Latency.", {"op"}, {0.1, 1, 10}, 1e-9)
          .WithLabels({"read"});
  h->Observe(0.05);
  h->Observe(0.1);  // le is inclusive
  h->Observe(5);
  h->Observe(50);
  const std::string expected =
      "# HELP t_seconds Latency.\n"
      "# TYPE t_seconds histogram\n"
      "t_seconds_bucket{op=\"read\",le=\"0.1\"} 2\n"
      "t_seconds_bucket{op=\"read\",le=\"1\"} 2\n"
      "t_seconds_bucket{op=\"read\",le=\"10\"} 3\n"
      "t_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n"
      "t_seconds_sum{op=\"read\"} " +
      FormatValue(55150000000 * 1e-9) +
      "\n"
      "t_seconds_count{op=\"read\"} 4\n";
  EXPECT_EQ(r.Render(), expected);
  Histogram::Snapshot snap = h->Take();
  EXPECT_EQ(snap.count, 4u);
  EXPECT_THAT(snap.buckets, ::testing::ElementsAre(2, 0, 1, 1));
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  Registry r;
  Counter* c = r.AddCounter("t_total", "T.", {}).WithLabels({});
  Histogram* h =
      r.AddHistogram("t_h", "H.", {}, LatencyBuckets(), 1e-9).WithLabels({});
  Gauge* g = r.AddGauge("t_g", "G.", {}).WithLabels({});
  constexpr int kThreads = 8, kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        c->Inc();
        h->ObserveUnits(1000000);
        g->Add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->Value(), uint64_t{kThreads} * kEach);
  EXPECT_EQ(h->Take().count, uint64_t{kThreads} * kEach);
  EXPECT_EQ(g->Value(), double{kThreads} * kEach);
}

TEST(MetricsTest, NumbersUseTheExpositionSyntax) {
  EXPECT_EQ(FormatValue(1), "1");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(1e-05), "1e-05");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(NAN), "NaN");
}

// Programming errors stop the process with the reason (GRANARY_CHECK).
TEST(MetricsDeathTest, ProgrammingErrorsStopTheProcessWithTheReason) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Registry r;
  EXPECT_DEATH(r.AddCounter("bad-name", "x", {}),
               "invalid metric name 'bad-name'");
  EXPECT_DEATH(r.AddCounter("9lives", "x", {}), "invalid metric name");
  EXPECT_DEATH(r.AddCounter("ok", "x", {"bad:label"}),
               "invalid label name 'bad:label'");
  EXPECT_DEATH(r.AddCounter("ok2", "x", {"__reserved"}), "invalid label name");
  EXPECT_DEATH(r.AddHistogram("h", "x", {"le"}, {1}, 1),
               "invalid label name 'le'");
  EXPECT_DEATH(r.AddHistogram("h2", "x", {}, {2, 1}, 1),
               "increasing, non-negative bounds");
  EXPECT_DEATH(r.AddHistogram("h3", "x", {}, {}, 1),
               "increasing, non-negative bounds");
  EXPECT_DEATH(r.AddHistogram("h4", "x", {}, {1, 2}, 0),
               "needs a positive unit");
  EXPECT_DEATH(r.AddHistogram("h5", "x", {}, {1, 1.2}, 1),
               "closer than its unit");
  auto& f = r.AddCounter("dup_total", "x", {"a"});
  EXPECT_DEATH(r.AddGauge("dup_total", "x", {}),
               "'dup_total' is already registered");
  EXPECT_DEATH(f.WithLabels({}), "takes 1 label values, got 0");
  EXPECT_DEATH(f.WithLabels({"1", "2"}), "takes 1 label values, got 2");
  EXPECT_THAT(r.Render(), HasSubstr("# TYPE dup_total counter"));
}

TEST(MetricsTest, ProcessMetricsReadProc) {
  Registry r;
  AddProcessMetrics(&r);
  const std::string text = r.Render();
  for (const char* name :
       {"process_cpu_seconds_total ", "process_resident_memory_bytes ",
        "process_virtual_memory_bytes ", "process_open_fds ",
        "process_max_fds ", "process_start_time_seconds "}) {
    EXPECT_THAT(text, HasSubstr(std::string("\n") + name)) << name;
  }
}

}  // namespace
}  // namespace granary::metrics
