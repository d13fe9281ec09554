#include "core/request_context.h"

#include <string>

#include "absl/strings/str_cat.h"
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
  EXPECT_THAT(MakeContextValues({{"a", "1"}, {"a", "2"}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("given twice")));
  ContextMap many;
  for (size_t i = 0; i <= kMaxContextEntries; ++i) {
    many.emplace_back(absl::StrCat("k", i), "v");
  }
  EXPECT_THAT(MakeContextValues(many).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("entries")));
  ContextMap big;
  for (int i = 0; i < 5; ++i) {
    big.emplace_back(absl::StrCat("k", i), std::string(1000, 'v'));
  }
  EXPECT_THAT(MakeContextValues(big).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bytes")));
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
