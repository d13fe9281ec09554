// The breaking-change check's rules (interface_check.h) on golden cases:
// testdata/check/baseline.proto, the previous release, and copies of it with
// one change each, refused (naming what changed) or allowed.
#include "proto/codegen/interface_check.h"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "google/protobuf/compiler/importer.h"
#include "gtest/gtest.h"

namespace granary::codegen {
namespace {

namespace pb = ::google::protobuf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Matcher;

class Errors final : public pb::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column,
                const std::string& message) override {
    absl::StrAppend(&text, file, ":", line + 1, ": ", message, "\n");
  }
  std::string text;
};

// One file of testdata/check/ parsed with its imports, in a pool of its own
// (every file there defines the same messages).
struct Parsed {
  explicit Parsed(const std::string& name) : importer(&tree, &errors) {
    tree.MapPath("", GRANARY_CHECK_TESTDATA);
    tree.MapPath("", absl::StrCat(GRANARY_SOURCE_DIR, "/proto"));
    tree.MapPath("", "/usr/include");
    file = importer.Import(name);
  }
  pb::compiler::DiskSourceTree tree;
  Errors errors;
  pb::compiler::Importer importer;
  const pb::FileDescriptor* file = nullptr;
};

std::vector<std::string> Check(const std::string& changed) {
  Parsed old("baseline.proto");
  Parsed now(changed);
  EXPECT_NE(old.file, nullptr) << old.errors.text;
  EXPECT_NE(now.file, nullptr) << now.errors.text;
  if (old.file == nullptr || now.file == nullptr) return {"unparsed"};
  return CheckFile(*old.file, *now.file->pool());
}

struct Breaking {
  const char* proto;
  std::vector<const char*> problems;  // each a substring of one, in order
};

void PrintTo(const Breaking& b, std::ostream* os) { *os << b.proto; }

class BreakingTest : public ::testing::TestWithParam<Breaking> {};

TEST_P(BreakingTest, RefusedNamingTheChange) {
  std::vector<Matcher<std::string>> want;
  for (const char* p : GetParam().problems) want.push_back(HasSubstr(p));
  EXPECT_THAT(Check(GetParam().proto), ElementsAreArray(want));
}

constexpr char kBump[] =
    "(breaking: bump the version of check.v1.CartGrain to 3)";

INSTANTIATE_TEST_SUITE_P(
    Changes, BreakingTest,
    ::testing::Values(
        Breaking{"removed_method.proto",
                 {"check.v1.CartGrain.Remove: method Remove was removed or "
                  "renamed (callers call it by name, "
                  "/check.v1.CartGrain/Remove) (breaking: bump the version "
                  "of check.v1.CartGrain to 3)"}},
        Breaking{"renamed_method.proto",
                 {"check.v1.CartGrain.Get: method Get was removed or renamed",
                  "check.v1.CartGrain: method Fetch is new: bump the version "
                  "of check.v1.CartGrain to 3"}},
        Breaking{"changed_request.proto",
                 {"check.v1.CartGrain.Add: request type changed from "
                  "check.v1.AddRequest to check.v1.Item"}},
        Breaking{"changed_response.proto",
                 {"check.v1.CartGrain.Get: response type changed from "
                  "check.v1.Cart to check.v1.Item"}},
        Breaking{"changed_field_number.proto",
                 {"check.v1.CartGrain.Add: message check.v1.Item field 2 "
                  "(quantity): number changed from 2 to 4"}},
        Breaking{"changed_field_type.proto",
                 {"check.v1.CartGrain.Add: message check.v1.Item field 2 "
                  "(quantity): type changed from int64 to string (not "
                  "wire-compatible)"}},
        Breaking{"changed_one_way.proto",
                 {"check.v1.CartGrain.Remove: one_way changed from true to "
                  "false"}},
        Breaking{"changed_read_only.proto",
                 {"check.v1.CartGrain.Get: read_only changed from true to "
                  "false"}},
        Breaking{"changed_streaming.proto",
                 {"check.v1.CartGrain.Watch: server streaming changed from "
                  "true to false"}},
        Breaking{"added_method.proto",
                 {"check.v1.CartGrain: method Clear is new: bump the version "
                  "of check.v1.CartGrain to 3"}},
        Breaking{"removed_field.proto",
                 {"check.v1.CartGrain.Add: message check.v1.AddRequest field "
                  "2 (priority): removed without reserving its number (add "
                  "`reserved 2;`"}},
        Breaking{"version_down.proto",
                 {"check.v1.CartGrain: version went down from 2 to 1"}},
        Breaking{"changed_cardinality.proto",
                 {"check.v1.CartGrain.Add: message check.v1.AddRequest field "
                  "2 (priority): changed from singular int32 to repeated "
                  "int32"}},
        Breaking{"changed_map.proto",
                 {"check.v1.CartGrain.Add: message check.v1.AddRequest field "
                  "4 (counts): type changed from map<string, int64> to "
                  "map<string, string>"}},
        Breaking{"reused_reserved.proto",
                 {"check.v1.CartGrain.Add: message check.v1.Item field 9 "
                  "(note): uses a reserved number"}},
        Breaking{"changed_state.proto",
                 {"check.v1.CartGrain: grain option state changed from \"\" "
                  "to \"check.v1.Cart\""}},
        Breaking{"not_grain.proto", {"check.v1.CartGrain: no longer a grain"}},
        Breaking{"removed_service.proto",
                 {"check.v1.CartGrain: grain interface removed (from "
                  "baseline.proto)"}}));

// Each breaking change says how to allow it, and only a breaking change.
TEST(BreakingTest, BreakingChangesNameTheVersionThatAllowsThem) {
  EXPECT_THAT(Check("changed_streaming.proto"), ElementsAre(HasSubstr(kBump)));
  EXPECT_THAT(Check("version_down.proto"),
              ElementsAre(::testing::Not(HasSubstr("breaking"))));
}

class AllowedTest : public ::testing::TestWithParam<const char*> {};

TEST_P(AllowedTest, Passes) { EXPECT_THAT(Check(GetParam()), IsEmpty()); }

INSTANTIATE_TEST_SUITE_P(
    Changes, AllowedTest,
    ::testing::Values("baseline.proto", "ok_added_field.proto",
                      "ok_renamed_field.proto", "ok_added_method_bumped.proto",
                      "ok_breaking_bumped.proto", "ok_compatible.proto"));

TEST(InterfaceCheckTest, VersionZeroReadsAsOne) {
  Parsed old("baseline.proto");
  ASSERT_NE(old.file, nullptr) << old.errors.text;
  EXPECT_EQ(GrainVersion(*old.file->FindServiceByName("CartGrain")), 2u);
  EXPECT_TRUE(IsGrain(*old.file->FindServiceByName("CartGrain")));
  EXPECT_FALSE(IsGrain(*old.file->FindServiceByName("Plain")));
  Parsed stripped("not_grain.proto");
  ASSERT_NE(stripped.file, nullptr) << stripped.errors.text;
  EXPECT_EQ(GrainVersion(*stripped.file->FindServiceByName("CartGrain")), 1u);
}

// Bad input: two different services are not two releases of one.
TEST(InterfaceCheckTest, RefusesTwoDifferentServices) {
  Parsed old("baseline.proto");
  ASSERT_NE(old.file, nullptr) << old.errors.text;
  EXPECT_THAT(CheckInterface(*old.file->FindServiceByName("CartGrain"),
                             *old.file->FindServiceByName("Plain")),
              ElementsAre(HasSubstr("check.v1.Plain: compared with "
                                    "check.v1.CartGrain, another interface")));
}

}  // namespace
}  // namespace granary::codegen
