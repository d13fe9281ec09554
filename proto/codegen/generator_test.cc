// Runs protoc with protoc-gen-granary: golden output for a small proto, and
// clear generation-time errors for protos that misuse the grain options.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary::codegen {
namespace {

using ::testing::HasSubstr;

struct ProtocRun {
  int exit_code;
  std::string output;  // stdout and stderr
};

ProtocRun Protoc(const std::string& proto, const std::string& out_dir) {
  std::string cmd = absl::StrCat(
      GRANARY_PROTOC, " -I ", GRANARY_TESTDATA, " -I ", GRANARY_SOURCE_DIR,
      "/proto --plugin=protoc-gen-granary=", GRANARY_PLUGIN,
      " --granary_out=", out_dir, " ", GRANARY_TESTDATA, "/", proto, " 2>&1");
  ProtocRun run{0, ""};
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.output.append(buf, n);
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempDir() {
  auto dir = std::filesystem::temp_directory_path() /
             absl::StrCat("granary-codegen-", getpid(), "-",
                          ::testing::UnitTest::GetInstance()->random_seed());
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(GeneratorTest, GoldenOutput) {
  const std::string out = TempDir();
  ProtocRun run = Protoc("golden.proto", out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const char* name : {"golden.granary.h", "golden.granary.cc",
                           "golden.grain.h", "golden.grain.cc"}) {
    SCOPED_TRACE(name);
    std::string golden =
        ReadFile(std::filesystem::path(GRANARY_TESTDATA) / "golden" / name);
    ASSERT_FALSE(golden.empty());
    EXPECT_EQ(ReadFile(std::filesystem::path(out) / name), golden)
        << "regenerate testdata/golden if the change is intended";
  }
  std::filesystem::remove_all(out);
}

struct Misuse {
  const char* proto;
  const char* message;
};

class MisuseTest : public ::testing::TestWithParam<Misuse> {};

TEST_P(MisuseTest, FailsNamingFileServiceAndMethod) {
  const std::string out = TempDir();
  ProtocRun run = Protoc(GetParam().proto, out);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.output, HasSubstr(GetParam().proto));
  EXPECT_THAT(run.output, HasSubstr(GetParam().message));
  std::filesystem::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(
    Protos, MisuseTest,
    ::testing::Values(
        Misuse{"bad_one_way.proto",
               "service bad.Bad, method Fire: one_way methods must return "
               "google.protobuf.Empty, not bad.M"},
        Misuse{"bad_placement_number.proto",
               "service bad.Bad: unknown placement 9"},
        Misuse{"bad_placement_name.proto", "NEAREST"},
        Misuse{"bad_not_grain.proto",
               "service bad.Bad, method Get: (granary.method) is set but the "
               "service is not marked with (granary.grain)"},
        Misuse{"bad_streaming.proto",
               "service bad.Bad, method Upload: client-streaming methods "
               "cannot be grain methods"},
        Misuse{"bad_streaming_one_way.proto",
               "service bad.Bad, method Watch: a server-streaming method "
               "cannot be one_way"},
        Misuse{"bad_reserved.proto",
               "service bad.Bad, method OnActivate: the name OnActivate is "
               "reserved"},
        Misuse{"bad_stateless_state.proto",
               "service bad.Bad: a stateless_worker cannot declare persistent "
               "state (state: bad.Tally)"},
        Misuse{"bad_state_unknown.proto",
               "service bad.Bad: state message bad.Nowhere is not defined"},
        Misuse{"bad_placement_filter.proto",
               "service bad.Bad: placement_filter: label 'role' is not "
               "key=value"},
        Misuse{"bad_max_workers.proto",
               "service bad.Bad: max_local_workers is set but the grain is "
               "not a stateless_worker"}));

}  // namespace
}  // namespace granary::codegen
