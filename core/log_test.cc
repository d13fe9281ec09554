// Log line formats: text, and JSON with the leading key=value fields lifted
// out and everything escaped.
#include "core/log.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

TEST(LogTest, TextLinesCarryTimeLevelAndMessage) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, LogLevel::kWarning,
                          "2026-12-01T00:00:00.000000Z",
                          "grain=a/b turn_ms=120 slow turn"),
            "2026-12-01T00:00:00.000000Z W grain=a/b turn_ms=120 slow turn");
}

TEST(LogTest, JsonLinesLiftLeadingFieldsAndEscape) {
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, LogLevel::kInfo, "T",
                          "silo=s1 workers=2 started \"now\" a=b"),
            R"({"ts":"T","level":"info","silo":"s1","workers":"2",)"
            R"("msg":"started \"now\" a=b"})");
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, LogLevel::kError, "T",
                          "no fields\there\n\x01"),
            R"({"ts":"T","level":"error","msg":"no fields\there\n\u0001"})");
  // Reserved or malformed keys end the fields.
  EXPECT_EQ(
      FormatLogLine(LogFormat::kJson, LogLevel::kDebug, "T", "msg=x Key=y"),
      R"({"ts":"T","level":"debug","msg":"msg=x Key=y"})");
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, LogLevel::kInfo, "T", "k=v"),
            R"({"ts":"T","level":"info","k":"v","msg":""})");
}

TEST(LogTest, QuotedValuesCannotSplitLinesOrForgeFields) {
  EXPECT_EQ(LogQuote("Counter/alice"), "Counter/alice");
  EXPECT_EQ(LogQuote("a b=c"), "\"a b=c\"");
  EXPECT_EQ(LogQuote("x\"\\\n\xff"), "\"x\\\"\\\\\\n\\xff\"");
  EXPECT_EQ(LogQuote(""), "\"\"");
  // A key chosen to look like more fields stays one value.
  const std::string line = "grain=" + LogQuote("T/k method=Forged x") +
                           " method=Add turn_ms=3 slow turn";
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, LogLevel::kWarning, "T", line),
            R"({"ts":"T","level":"warning","grain":"T/k method=Forged x",)"
            R"("method":"Add","turn_ms":"3","msg":"slow turn"})");
  // Newlines stay escaped in text; non-ASCII bytes stay escapes in JSON.
  EXPECT_EQ(FormatLogLine(LogFormat::kText, LogLevel::kInfo, "T",
                          "grain=" + LogQuote("a\nb")),
            "T I grain=\"a\\nb\"");
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, LogLevel::kInfo, "T",
                          "k=" + LogQuote("\xc3\x01") + " m"),
            R"({"ts":"T","level":"info","k":"\\xc3\u0001","msg":"m"})");
  // A repeated key ends the fields.
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, LogLevel::kInfo, "T", "a=1 a=2 m"),
            R"({"ts":"T","level":"info","a":"1","msg":"a=2 m"})");
}

// Every byte of `line` is printable ASCII or part of a multi-byte sequence
// (no control character, in particular no newline).
bool NoControlBytes(const std::string& line) {
  for (unsigned char c : line) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// A message with line breaks, control characters, valid UTF-8 (é, U+1F600)
// and bytes that are not valid UTF-8: a lone continuation byte, a cut-off
// sequence, an overlong '/', a surrogate, a code point past U+10FFFF, 0xff.
constexpr char kHostile[] =
    "grain=a\nb\r\tc\x01\x1b[2J\x7f end\n2026 E forged "
    "\xc3\xa9 \xf0\x9f\x98\x80 \x80 \xe2\x82 \xc0\xaf \xed\xa0\x80 "
    "\xf4\x90\x80\x80 \xff";

TEST(LogTest, TextLinesEscapeControlCharactersAndInvalidUtf8) {
  const std::string line =
      FormatLogLine(LogFormat::kText, LogLevel::kWarning, "T", kHostile);
  EXPECT_EQ(line,
            "T W grain=a\\nb\\r\\tc\\x01\\x1b[2J\\x7f end\\n2026 E forged "
            "\xc3\xa9 \xf0\x9f\x98\x80 \\x80 \\xe2\\x82 \\xc0\\xaf "
            "\\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 \\xff");
  EXPECT_TRUE(NoControlBytes(line));
}

TEST(LogTest, JsonLinesStayValidWhateverTheMessageHolds) {
  const std::string line =
      FormatLogLine(LogFormat::kJson, LogLevel::kWarning, "T", kHostile);
  // The bare value ends at the first space; control characters are JSON
  // escapes, invalid bytes the escaped text \xNN, valid UTF-8 stays.
  EXPECT_EQ(
      line,
      R"({"ts":"T","level":"warning","grain":"a\nb\r\tc\u0001\u001b[2J\u007f",)"
      R"("msg":"end\n2026 E forged )"
      "\xc3\xa9 \xf0\x9f\x98\x80 "
      R"(\\x80 \\xe2\\x82 \\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 \\xff"})");
  EXPECT_TRUE(NoControlBytes(line));
  // Raw bytes in a bare field value, and a bogus escape in a quoted one.
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, LogLevel::kInfo, "T",
                          "k=\xff\xc3 q=\"\\xzz\" m\r"),
            R"({"ts":"T","level":"info","k":"\\xff\\xc3","q":"xzz",)"
            R"("msg":"m\r"})");
}

TEST(LogTest, SuppressedCountIsAFieldInJson) {
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, LogLevel::kWarning, "T",
                          "suppressed=3 peer=p refused"),
            R"({"ts":"T","level":"warning","suppressed":"3","peer":"p",)"
            R"("msg":"refused"})");
}

TEST(LogEveryTest, OneLinePerPeriodAndTheRestCounted) {
  internal::LogEveryState every;
  EXPECT_TRUE(every.Allow(1000, 100));  // the first goes out
  EXPECT_FALSE(every.Allow(1000, 100));
  EXPECT_FALSE(every.Allow(1099, 100));
  EXPECT_FALSE(every.Allow(900, 100));  // a clock read from before the last
  EXPECT_EQ(every.TakeSuppressed(), 3);
  EXPECT_EQ(every.TakeSuppressed(), 0);
  EXPECT_TRUE(every.Allow(1100, 100));  // a period after the last one
  EXPECT_FALSE(every.Allow(1150, 100));
  EXPECT_TRUE(every.Allow(1200, 100));
  EXPECT_EQ(every.TakeSuppressed(), 1);
}

TEST(LogEveryTest, RacingThreadsLetOneLineThrough) {
  internal::LogEveryState every;
  constexpr int kThreads = 4, kCalls = 1000;
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        if (every.Allow(absl::Hours(1))) allowed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 1);
  EXPECT_EQ(every.TakeSuppressed(), kThreads * kCalls - 1);
}

TEST(LogEveryTest, MacroLogsFirstSkipsOperandsAndReportsTheCount) {
  SetLogFormat(LogFormat::kText);
  int evaluated = 0;
  auto operand = [&evaluated] { return ++evaluated; };
  testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) {
    // One call site: the first line goes out, the next three fall within the
    // hour, the last asks for no gap and carries the count.
    GRANARY_LOG_EVERY(kWarning, i < 4 ? absl::Hours(1) : absl::ZeroDuration())
        << "i=" << i << " evaluated=" << operand() << " flood";
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(evaluated, 2);
  const std::vector<std::string> lines =
      absl::StrSplit(err, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << err;
  EXPECT_TRUE(absl::EndsWith(lines[0], " W i=0 evaluated=1 flood")) << lines[0];
  EXPECT_TRUE(absl::EndsWith(lines[1], " W suppressed=3 i=4 evaluated=2 flood"))
      << lines[1];
}

TEST(LogEveryTest, MacroBelowTheLevelNeitherLogsNorCounts) {
  const LogLevel saved = GetLogLevel();
  SetLogLevel(LogLevel::kError);
  int evaluated = 0;
  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    GRANARY_LOG_EVERY(kWarning, absl::ZeroDuration()) << ++evaluated;
  }
  SetLogLevel(saved);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(evaluated, 0);
}

TEST(LogTest, FormatsAndLevelsParse) {
  LogFormat f;
  EXPECT_TRUE(ParseLogFormat("JSON", &f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_TRUE(ParseLogFormat("text", &f));
  EXPECT_EQ(f, LogFormat::kText);
  EXPECT_FALSE(ParseLogFormat("xml", &f));
  LogLevel l;
  EXPECT_TRUE(ParseLogLevel("warning", &l));
  EXPECT_FALSE(ParseLogLevel("loud", &l));
}

}  // namespace
}  // namespace granary
