#include "core/labels.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::granary::matchers::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(LabelsTest, ParsesSortsAndFormats) {
  absl::StatusOr<Labels> l = ParseLabels("zone=a,role=billing,tier=");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_THAT(*l, ElementsAre(Pair("role", "billing"), Pair("tier", ""),
                              Pair("zone", "a")));
  EXPECT_EQ(FormatLabels(*l), "role=billing,tier=,zone=a");
  EXPECT_TRUE(ParseLabels("")->empty());
}

TEST(LabelsTest, RefusesBadLabels) {
  EXPECT_THAT(ParseLabels("zone"), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("not key=value")));
  EXPECT_THAT(ParseLabels("=a"), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("label key")));
  EXPECT_THAT(ParseLabels("Zone=a"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseLabels("-zone=a"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      ParseLabels("zone=a b"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("label value")));
  EXPECT_THAT(
      ParseLabels("zone=a,zone=b"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("given twice")));
  EXPECT_THAT(ParseLabels("zone=a,"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseLabels(std::string(64, 'k') + "=v"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseLabels("k=" + std::string(64, 'v')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseLabels("k=\xff\x01"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<std::string> parts;
  for (int i = 0; i <= kMaxLabels; ++i)
    parts.push_back(absl::StrCat("k", i, "=v"));
  const std::string many = absl::StrJoin(parts, ",");
  EXPECT_THAT(ParseLabels(many), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("at most")));
}

TEST(LabelsTest, AFilterMatchesSilosCarryingEachOfItsLabels) {
  const Labels silo = *ParseLabels("role=billing,zone=a");
  EXPECT_TRUE(LabelsMatch({}, silo));
  EXPECT_TRUE(LabelsMatch(*ParseLabels("role=billing"), silo));
  EXPECT_TRUE(LabelsMatch(*ParseLabels("zone=a,role=billing"), silo));
  EXPECT_FALSE(LabelsMatch(*ParseLabels("role=web"), silo));
  EXPECT_FALSE(LabelsMatch(*ParseLabels("role=billing,tier=1"), silo));
  EXPECT_FALSE(LabelsMatch(*ParseLabels("role=billing"), {}));
}

}  // namespace
}  // namespace granary
