#include "core/request_context.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/call.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::granary::matchers::StatusIs;
using ::testing::HasSubstr;

constexpr char kHeader[] =
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(ContextKeyTest, AcceptsMetadataSafeNamesOnly) {
  EXPECT_TRUE(ValidateContextKey("tenant").ok());
  EXPECT_TRUE(ValidateContextKey("a.b_c-9").ok());
  EXPECT_THAT(ValidateContextKey(""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateContextKey(std::string(65, 'k')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateContextKey("Tenant"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateContextKey("a b"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateContextKey("blob-bin"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-bin")));
}

TEST(ContextValueTest, AcceptsPrintableAsciiUpToTheBound) {
  EXPECT_TRUE(ValidateContextValue("").ok());
  EXPECT_TRUE(ValidateContextValue("a b=c,d").ok());
  EXPECT_TRUE(ValidateContextValue(std::string(1024, 'v')).ok());
  EXPECT_THAT(ValidateContextValue(std::string(1025, 'v')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateContextValue("line\nbreak"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateContextValue("\xc3\xa9"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ContextMapTest, SortsAndBoundsWhatArrives) {
  absl::StatusOr<std::shared_ptr<const ContextMap>> values =
      MakeContextValues({{"b", "2"}, {"a", "1"}});
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(**values, (ContextMap{{"a", "1"}, {"b", "2"}}));
  EXPECT_EQ(*MakeContextValues({}), nullptr);
  EXPECT_THAT(
      MakeContextValues({{"a", "1"}, {"a", "2"}}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("given twice")));
  ContextMap many;
  for (size_t i = 0; i <= kMaxContextEntries; ++i) {
    many.emplace_back(absl::StrCat("k", i), "v");
  }
  EXPECT_THAT(
      MakeContextValues(many).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("entries")));
  ContextMap big;
  for (int i = 0; i < 5; ++i) {
    big.emplace_back(absl::StrCat("k", i), std::string(1000, 'v'));
  }
  EXPECT_THAT(MakeContextValues(big).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bytes")));
}

TEST(TraceContextTest, ParsesAndPrintsTraceparent) {
  std::optional<TraceContext> t = TraceContext::Parse(kHeader);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->TraceIdHex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t->span, 0x00f067aa0ba902b7u);
  EXPECT_EQ(t->flags, 1);
  EXPECT_EQ(t->ToTraceparent(), kHeader);
  // A later version may append fields.
  EXPECT_TRUE(TraceContext::Parse(
                  "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                  .has_value());
}

TEST(TraceContextTest, RefusesWhatW3cSaysToRestart) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
       }) {
    EXPECT_FALSE(TraceContext::Parse(bad).has_value()) << bad;
  }
}

TEST(TraceContextTest, ContinuingKeepsTheTraceWithANewSpan) {
  TraceContext t = ContinueTrace(kHeader);
  EXPECT_EQ(t.TraceIdHex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_NE(t.span, 0x00f067aa0ba902b7u);
  EXPECT_NE(t.span, 0u);
  TraceContext fresh = ContinueTrace("not a header");
  EXPECT_TRUE(fresh.valid());
  EXPECT_NE(fresh.TraceIdHex(), t.TraceIdHex());
  EXPECT_NE(TraceContext::NewRoot().TraceIdHex(),
            TraceContext::NewRoot().TraceIdHex());
}

// kHeader in the binary form of granary.v1.Request.trace.
std::string HeaderInBinary() {
  return std::string(
      "\x4b\xf9\x2f\x35\x77\xb3\x4d\xa6"  // trace id, high half
      "\xa3\xce\x92\x9d\x0e\x0e\x47\x36"  // trace id, low half
      "\x00\xf0\x67\xaa\x0b\xa9\x02\xb7"  // parent span id
      "\x01",                             // flags: sampled
      kTraceBinaryBytes);
}

TEST(TraceContextTest, BinaryFormIsTheTraceparentsFieldsBigEndian) {
  std::optional<TraceContext> t = TraceContext::Parse(kHeader);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->ToBinary(), HeaderInBinary());
  std::optional<TraceContext> back = TraceContext::FromBinary(t->ToBinary());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->trace_hi, t->trace_hi);
  EXPECT_EQ(back->trace_lo, t->trace_lo);
  EXPECT_EQ(back->span, t->span);
  EXPECT_EQ(back->flags, t->flags);
  EXPECT_EQ(back->ToTraceparent(), kHeader);
  // AppendBinary appends; nothing for no trace.
  std::string out = "x";
  t->AppendBinary(&out);
  EXPECT_EQ(out, absl::StrCat("x", HeaderInBinary()));
  EXPECT_EQ(TraceContext().ToBinary(), "");
}

TEST(TraceContextTest, BinaryRoundTripsEveryFieldAndFlag) {
  for (int i = 0; i < 64; ++i) {
    TraceContext t = TraceContext::NewRoot();
    t.flags = static_cast<uint8_t>(i * 37);
    std::string wire = t.ToBinary();
    ASSERT_EQ(wire.size(), kTraceBinaryBytes);
    std::optional<TraceContext> back = TraceContext::FromBinary(wire);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->TraceIdHex(), t.TraceIdHex());
    EXPECT_EQ(back->span, t.span);
    EXPECT_EQ(back->flags, t.flags);
  }
  // Ids with the top and bottom bits set (no sign or shift mistakes).
  TraceContext edge{~uint64_t{0}, 1, uint64_t{1} << 63, 0xff};
  std::optional<TraceContext> back = TraceContext::FromBinary(edge.ToBinary());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->ToTraceparent(),
            "00-ffffffffffffffff0000000000000001-8000000000000000-ff");
}

TEST(TraceContextTest, MalformedBinaryIsRefusedAndRestartsTheTrace) {
  const std::string good = HeaderInBinary();
  std::string zero_trace = good;
  zero_trace.replace(0, 16, 16, '\0');
  std::string zero_span = good;
  zero_span.replace(16, 8, 8, '\0');
  // Half of the trace id zero is still a trace id (W3C: all zero is not).
  std::string zero_hi = good;
  zero_hi.replace(0, 8, 8, '\0');
  ASSERT_TRUE(TraceContext::FromBinary(zero_hi).has_value());
  EXPECT_FALSE(TraceContext::FromBinary("").has_value());
  for (const std::string& bad :
       {good.substr(0, 1), good.substr(0, 24), good + "\x01",
        std::string(kTraceBinaryBytes, '\0'), zero_trace, zero_span,
        std::string(kHeader)}) {
    EXPECT_FALSE(TraceContext::FromBinary(bad).has_value())
        << "size " << bad.size();
    // Over the wire a malformed binary trace restarts the trace, with or
    // without a text form beside it (the binary form is the one read).
    for (absl::string_view text : {"", kHeader}) {
      TraceContext t = ContinueWireTrace(bad, text);
      EXPECT_TRUE(t.valid());
      EXPECT_NE(t.TraceIdHex(), "4bf92f3577b34da6a3ce929d0e0e4736");
      EXPECT_NE(t.TraceIdHex(), std::string(32, '0'));
    }
  }
}

TEST(TraceContextTest, WireTracePrefersBinaryThenTextThenRestarts) {
  const std::string other =
      TraceContext{1, 2, 3, 1}.ToBinary();  // trace id ...01...02
  TraceContext from_binary = ContinueWireTrace(other, kHeader);
  EXPECT_EQ(from_binary.TraceIdHex(), "00000000000000010000000000000002");
  EXPECT_NE(from_binary.span, 3u);  // a new span under the caller's
  EXPECT_NE(from_binary.span, 0u);
  EXPECT_EQ(from_binary.flags, 1);

  TraceContext from_text = ContinueWireTrace("", kHeader);
  EXPECT_EQ(from_text.TraceIdHex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_NE(from_text.span, 0x00f067aa0ba902b7u);

  // An empty binary field is no binary field (proto3): the text form is
  // read, and without one (or with one that does not parse) a new trace
  // starts.
  TraceContext from_none = ContinueWireTrace("", "");
  EXPECT_TRUE(from_none.valid());
  TraceContext from_bad_text = ContinueWireTrace("", "00-zz");
  EXPECT_TRUE(from_bad_text.valid());
  EXPECT_NE(from_bad_text.TraceIdHex(), from_none.TraceIdHex());
}

TEST(CurrentContextTest, SetGetRemoveInATurnLeaveTheThreadsAlone) {
  ASSERT_TRUE(SetContext("outside", "1").ok());
  TurnContext turn;
  turn.request = RootContext();
  {
    ScopedTurn scoped(&turn);
    EXPECT_EQ(GetContext("outside"), std::nullopt);
    ASSERT_TRUE(SetContext("k", "v").ok());
    ASSERT_TRUE(SetContext("k", "w").ok());
    EXPECT_EQ(GetContext("k"), "w");
    EXPECT_THAT(SetContext("K", "v"),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(SetContext("big", std::string(2000, 'x')),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(ContextEntries(), (ContextMap{{"k", "w"}}));
    EXPECT_EQ(CurrentTraceId(), turn.request.trace.TraceIdHex());
    RemoveContext("k");
    EXPECT_EQ(GetContext("k"), std::nullopt);
  }
  EXPECT_EQ(GetContext("outside"), "1");
  EXPECT_EQ(CurrentTraceId(), "");
  // Copy on write: a copy taken before a change keeps the old entries.
  RequestContext before = internal::ThreadContext();
  ASSERT_TRUE(SetContext("outside", "2").ok());
  EXPECT_EQ(before.values->front().second, "1");
  internal::ThreadContext() = RequestContext{};
}

TEST(CurrentContextTest, SettingPastTheBoundLeavesTheContextAsItWas) {
  TurnContext turn;
  ScopedTurn scoped(&turn);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(SetContext(absl::StrCat("k", i), std::string(1000, 'v')).ok());
  }
  EXPECT_THAT(SetContext("k4", std::string(1000, 'v')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(ContextEntries().size(), 4u);
}

}  // namespace
}  // namespace granary
