// protoc-gen-granary's baseline=DIR mode (baseline_generator.h), run by
// protoc as granary_grain_library's BASELINE runs it: a breaking change fails
// generation naming the file and the change, a compatible or new file
// generates, and a bad baseline fails with a clear message.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary::codegen {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

struct Outcome {
  int exit_code;
  std::string output;  // stdout and stderr
};

Outcome Shell(const std::string& cmd) {
  Outcome run{-1, ""};
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.output.append(buf, n);
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A scratch tree: new/ the protos protoc generates from, old/ the baseline.
class BaselineGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("baseline-", getpid(), "-", info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "out");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // testdata/check/NAME as ROOT/shop/cart.proto.
  void Place(const std::string& name, const std::string& root) {
    fs::create_directories(dir_ / root / "shop");
    fs::copy_file(fs::path(GRANARY_CHECK_TESTDATA) / name,
                  dir_ / root / "shop" / "cart.proto",
                  fs::copy_options::overwrite_existing);
  }

  Outcome Protoc(const std::string& options) {
    return Shell(
        absl::StrCat(GRANARY_PROTOC, " -I ", (dir_ / "new").string(), " -I ",
                     GRANARY_SOURCE_DIR, "/proto --plugin=protoc-gen-granary=",
                     GRANARY_PLUGIN, " --granary_out=", (dir_ / "out").string(),
                     options.empty() ? "" : " --granary_opt=", options, " ",
                     (dir_ / "new" / "shop" / "cart.proto").string()));
  }
  std::string Old() const { return (dir_ / "old").string(); }

  fs::path dir_;
};

TEST_F(BaselineGeneratorTest, BreakingChangeFailsGenerationNamingIt) {
  Place("baseline.proto", "old");
  Place("changed_field_type.proto", "new");
  Outcome run = Protoc("baseline=" + Old());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.output, HasSubstr("shop/cart.proto: not compatible with "
                                    "the baseline in"));
  EXPECT_THAT(run.output,
              HasSubstr("check.v1.CartGrain.Add: message check.v1.Item field "
                        "2 (quantity): type changed from int64 to string"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "shop" / "cart.granary.h"));
}

TEST_F(BaselineGeneratorTest, CompatibleChangeGenerates) {
  Place("baseline.proto", "old");
  Place("ok_added_method_bumped.proto", "new");
  Outcome run = Protoc("baseline=" + Old());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "shop" / "cart.granary.h"));
}

TEST_F(BaselineGeneratorTest, NewFileGenerates) {
  fs::create_directories(dir_ / "old");
  Place("baseline.proto", "new");
  Outcome run = Protoc("baseline=" + Old());
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST_F(BaselineGeneratorTest, WithoutBaselineNothingIsChecked) {
  Place("removed_method.proto", "new");
  Outcome run = Protoc("");
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

// The baseline imports a file that only a baseline_include directory holds.
TEST_F(BaselineGeneratorTest, BaselineImportsFromBaselineInclude) {
  Write(dir_ / "old" / "shop" / "cart.proto",
        "syntax = \"proto3\";\npackage shop;\nimport \"granary/options.proto\";"
        "\nimport \"legacy/money.proto\";\nservice Cart {\n"
        "  option (granary.grain) = {};\n"
        "  rpc Pay(legacy.Money) returns (legacy.Money);\n}\n");
  Write(dir_ / "legacy" / "legacy" / "money.proto",
        "syntax = \"proto3\";\npackage legacy;\nmessage Money { int64 cents = "
        "1; }\n");
  Write(dir_ / "new" / "shop" / "cart.proto",
        "syntax = \"proto3\";\npackage shop;\nimport \"granary/options.proto\";"
        "\nmessage Money { int64 cents = 1; }\nservice Cart {\n"
        "  option (granary.grain) = { version: 2 };\n"
        "  rpc Pay(Money) returns (Money);\n}\n");
  Outcome without = Protoc("baseline=" + Old());
  EXPECT_NE(without.exit_code, 0);
  EXPECT_THAT(without.output, HasSubstr("does not parse"));
  EXPECT_THAT(without.output, HasSubstr("legacy/money.proto"));
  Outcome with = Protoc(absl::StrCat(
      "baseline=", Old(), ",baseline_include=", (dir_ / "legacy").string()));
  EXPECT_EQ(with.exit_code, 0) << with.output;
}

TEST_F(BaselineGeneratorTest, MissingBaselineDirectoryIsRefused) {
  Place("baseline.proto", "new");
  Outcome run = Protoc("baseline=" + (dir_ / "nowhere").string());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.output, HasSubstr("nowhere is not a directory"));
}

TEST_F(BaselineGeneratorTest, UnparseableBaselineIsRefused) {
  Write(dir_ / "old" / "shop" / "cart.proto",
        "syntax = \"proto3\";\nmessage {");
  Place("baseline.proto", "new");
  Outcome run = Protoc("baseline=" + Old());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.output, HasSubstr("does not parse"));
  EXPECT_THAT(run.output, HasSubstr("shop/cart.proto:2:"));
}

TEST_F(BaselineGeneratorTest, BadParametersAreRefused) {
  Place("baseline.proto", "new");
  Outcome empty = Protoc("baseline=");
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_THAT(empty.output, HasSubstr("baseline= needs a directory"));
  Outcome include_alone = Protoc("baseline_include=" + Old());
  EXPECT_NE(include_alone.exit_code, 0);
  EXPECT_THAT(include_alone.output,
              HasSubstr("baseline_include is given without baseline=DIR"));
  fs::create_directories(dir_ / "old");
  Outcome bad_include = Protoc(absl::StrCat(
      "baseline=", Old(), ",baseline_include=", (dir_ / "gone").string()));
  EXPECT_NE(bad_include.exit_code, 0);
  EXPECT_THAT(bad_include.output, HasSubstr("gone is not a directory"));
  EXPECT_THAT(bad_include.output, Not(HasSubstr("breaking")));
}

}  // namespace
}  // namespace granary::codegen
