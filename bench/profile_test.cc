// ParsePerfReportLine: the lines of `perf report --stdio -q --sort dso,sym`
// that --profile reads its hot functions from, and the lines it must skip.
#include "bench/profile.h"

#include <optional>

#include "gtest/gtest.h"

namespace granary::bench {
namespace {

TEST(ParsePerfReportLine, ReadsUserAndKernelLines) {
  std::optional<HotSymbol> h = ParsePerfReportLine(
      "    12.34%            41  granary-silo       [.] "
      "granary::Mailbox::Push(granary::Message*)");
  ASSERT_TRUE(h.has_value());
  EXPECT_DOUBLE_EQ(h->percent, 12.34);
  EXPECT_EQ(h->samples, 41);
  EXPECT_EQ(h->dso, "granary-silo");
  EXPECT_EQ(h->symbol, "granary::Mailbox::Push(granary::Message*)");

  h = ParsePerfReportLine("     0.51%  3  [kernel.kallsyms]  [k] futex_wake  ");
  ASSERT_TRUE(h.has_value());
  EXPECT_DOUBLE_EQ(h->percent, 0.51);
  EXPECT_EQ(h->dso, "[kernel.kallsyms]");
  EXPECT_EQ(h->symbol, "futex_wake");
}

TEST(ParsePerfReportLine, KeepsAnAddressWherePerfHadNoName) {
  std::optional<HotSymbol> h =
      ParsePerfReportLine("1.00%\t7\tlibc.so.6\t[.] 0x00000000000a1b2c");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->dso, "libc.so.6");
  EXPECT_EQ(h->symbol, "0x00000000000a1b2c");
}

TEST(ParsePerfReportLine, SkipsEverythingElse) {
  for (const char* line : {
           "", "# Samples: 2K of event 'cpu-clock'", "#",
           "    12.34%",                             // no samples
           "    12.34%  41",                         // no dso
           "    12.34%  x1  granary-silo  [.] foo",  // samples not a number
           "    12.34%  0  granary-silo  [.] foo",   // no samples
           "    12.34%  41  granary-silo",           // no privilege level
           "    12.34%  41  granary-silo  [.]",      // no symbol
           "    12.34%  41  granary-silo  [.]    ",  // blank symbol
           "    12.34%  41  granary-silo  .] foo",   // broken bracket
           "    abc%  41  granary-silo  [.] foo",    // no number
           "    -1%  41  granary-silo  [.] foo",     // out of range
           "    101%  41  granary-silo  [.] foo",    // out of range
           "  41  granary-silo  [.] foo",            // no percent
       }) {
    EXPECT_FALSE(ParsePerfReportLine(line).has_value()) << "'" << line << "'";
  }
}

}  // namespace
}  // namespace granary::bench
