// Log line formats: text, and JSON with the leading key=value fields lifted
// out and everything escaped.
#include "core/log.h"

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
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, LogLevel::kDebug, "T",
                          "msg=x Key=y"),
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
