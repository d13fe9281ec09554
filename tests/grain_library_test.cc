// Grain libraries (silo/grain_library.h, silo/grain_library_loader.h): what
// the silo reads of a library before it loads it, the libraries it refuses
// and why, and the Greeter grain of examples/standalone loaded into the stock
// granary-silo with --grain_library and called. (tests/sdk_test.sh does the
// same with the installed packages alone.)
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "core/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/grain_library_loader.h"
#include "tests/process_util.h"

namespace granary::silo {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::granary::testing::AnyPorts;
using ::granary::testing::Field;
using ::granary::testing::RunTool;
using ::granary::testing::SiloProcess;
using ::granary::testing::TempDir;
using ::granary::testing::ToolRun;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kLibraries = GRANARY_TEST_LIBRARY_DIR;
std::string Library(const std::string& name) {
  return absl::StrCat(kLibraries, "/libtest_", name, ".so");
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string WriteFile(const std::string& name, const std::string& bytes) {
  const std::string path = absl::StrCat(TempDir("libraries"), "/", name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(GrainLibraryTest, TheNoteSaysTheVersionItWasBuiltAgainst) {
  absl::StatusOr<GrainLibraryNote> note =
      ReadGrainLibraryNote(Library("greeter"));
  ASSERT_THAT(note.status(), IsOk());
  EXPECT_EQ(note->abi, GRANARY_GRAIN_LIBRARY_ABI);
  EXPECT_EQ(note->version, kVersion);
  EXPECT_THAT(CheckGrainLibrary(Library("greeter")), IsOk());

  note = ReadGrainLibraryNote(Library("other_version"));
  ASSERT_THAT(note.status(), IsOk());
  EXPECT_EQ(note->version, "0.0.1");
}

TEST(GrainLibraryTest, AnotherVersionIsRefusedNamingBoth) {
  const std::string path = Library("other_version");
  absl::Status s = CheckGrainLibrary(path);
  EXPECT_THAT(
      s,
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(HasSubstr(path), HasSubstr("built against Granary 0.0.1"),
                HasSubstr(absl::StrCat("this silo runs Granary ", kVersion)))));
  EXPECT_THAT(GrainLibrary::Load(path).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("built against Granary 0.0.1")));
}

TEST(GrainLibraryTest, AnEntryPointThatDisagreesWithItsNoteIsRefused) {
  EXPECT_THAT(CheckGrainLibrary(Library("entry_disagrees")), IsOk());
  EXPECT_THAT(GrainLibrary::Load(Library("entry_disagrees")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("built against Granary 9.9.9"),
                             HasSubstr(kVersion))));
}

TEST(GrainLibraryTest, ALibraryWithoutTheEntryPointIsRefused) {
  EXPECT_THAT(ReadGrainLibraryNote(Library("no_entry")).status(),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(GrainLibrary::Load(Library("no_entry")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("no Granary grain-library entry point"),
                             HasSubstr("granary_grain_library_v1"),
                             HasSubstr(absl::StrCat("Granary ", kVersion)))));
}

TEST(GrainLibraryTest, FilesThatAreNoSharedLibraryAreRefused) {
  EXPECT_THAT(CheckGrainLibrary("/nonexistent/libx.so"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot be read")));
  EXPECT_THAT(CheckGrainLibrary(TempDir("a-directory")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a regular file")));
  EXPECT_THAT(CheckGrainLibrary(WriteFile("text.so", "hello, world\n")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a 64-bit ELF shared library")));
  EXPECT_THAT(
      CheckGrainLibrary(WriteFile("empty.so", "")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no ELF header")));
  EXPECT_THAT(
      CheckGrainLibrary(WriteFile("archive.a", "!<arch>\nfoo.o/")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no ELF header")));
  // A real library cut short: its section table is past the end.
  const std::string good = ReadFile(Library("greeter"));
  ASSERT_GT(good.size(), 4096u);
  EXPECT_THAT(CheckGrainLibrary(WriteFile("cut.so", good.substr(0, 4096))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("past the end of the file")));
  // 32-bit, and an executable rather than a shared object.
  std::string bits32 = good;
  bits32[4] = 1;  // EI_CLASS = ELFCLASS32
  EXPECT_THAT(CheckGrainLibrary(WriteFile("bits32.so", bits32)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not 64-bit little-endian")));
  std::string exec = good;
  exec[16] = 2;  // e_type = ET_EXEC
  exec[17] = 0;
  EXPECT_THAT(CheckGrainLibrary(WriteFile("exec.so", exec)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a shared object")));
  // Another machine's library.
  std::string arm = good;
  arm[18] = static_cast<char>(183);  // e_machine = EM_AARCH64
  arm[19] = 0;
  EXPECT_THAT(CheckGrainLibrary(WriteFile("arm.so", arm)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("built for machine 183")));
  // Section table bounds that lie: a huge count, an index past it.
  std::string lies = good;
  lies[60] = '\xff';  // e_shnum low byte
  lies[61] = '\xff';
  EXPECT_THAT(CheckGrainLibrary(WriteFile("lies.so", lies)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A note of the right section name but not of the right form.
  std::string garbled = good;
  const size_t at = garbled.find("granary-grain-library abi=");
  ASSERT_NE(at, std::string::npos);
  garbled.replace(at, 7, "GRANARY");
  EXPECT_THAT(CheckGrainLibrary(WriteFile("garbled.so", garbled)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("malformed .granary_library section")));
}

// granary-silo: the library's grains are served (gRPC reflection included),
// the flag may be repeated, and a bad library stops the start naming it.
TEST(GrainLibraryProcessTest, TheStockSiloHostsALibrarysGrains) {
  SiloProcess silo([] {
    std::vector<std::string> args = AnyPorts(TempDir("silo"));
    args.push_back("--grain_library=" + Library("greeter"));
    return args;
  }());
  const std::string ready = silo.ReadyLine();
  ASSERT_THAT(ready, HasSubstr("READY")) << silo.Stderr();
  ToolRun call = RunTool(GRANARY_CLI_BINARY,
                         {"--gateway=" + Field(ready, "gateway"), "call",
                          "Greeter/bob", "Greet", R"({"name":"Ada"})"});
  EXPECT_EQ(call.exit_code, 0) << call.err;
  EXPECT_THAT(call.out, HasSubstr(R"("text":"Hello, Ada, from bob!")"));
  EXPECT_THAT(call.out, HasSubstr(R"("greetings":"1")"));
  ToolRun types = RunTool(GRANARY_CLI_BINARY,
                          {"--gateway=" + Field(ready, "gateway"), "types"});
  EXPECT_THAT(types.out, HasSubstr("granary.standalone.Greeter"));
}

TEST(GrainLibraryProcessTest, BadLibrariesStopTheStartNamingThem) {
  // Repeated: the first library counts too (it is refused), not only the
  // last.
  ToolRun twice =
      RunTool(GRANARY_SILO_BINARY,
              {"--check_config", "--grain_library=" + Library("other_version"),
               "--grain_library", Library("greeter")});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_THAT(twice.err, AllOf(HasSubstr(Library("other_version")),
                               HasSubstr("built against Granary 0.0.1"),
                               HasSubstr(kVersion)));
  // One library twice would add its grain types twice.
  ToolRun same =
      RunTool(GRANARY_SILO_BINARY,
              {"--check_config", "--grain_library=" + Library("greeter") + "," +
                                     Library("greeter")});
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_THAT(same.err, HasSubstr("twice"));

  // Repeated in a --config file: both count there too.
  const std::string config = WriteFile(
      "silo.flags", absl::StrCat("--grain_library=", Library("other_version"),
                                 "\n# a comment\n--grain_library=",
                                 Library("greeter"), "\n"));
  ToolRun in_config =
      RunTool(GRANARY_SILO_BINARY, {"--check_config", "--config=" + config});
  EXPECT_EQ(in_config.exit_code, 2);
  EXPECT_THAT(in_config.err, HasSubstr("built against Granary 0.0.1"));
  // The command line replaces the file's list, as for any flag.
  ToolRun replaced =
      RunTool(GRANARY_SILO_BINARY, {"--check_config", "--config=" + config,
                                    "--grain_library=" + Library("greeter")});
  EXPECT_EQ(replaced.exit_code, 0) << replaced.err;

  ToolRun no_entry =
      RunTool(GRANARY_SILO_BINARY,
              {"--check_config", "--grain_library=" + Library("no_entry")});
  EXPECT_EQ(no_entry.exit_code, 2);
  EXPECT_THAT(no_entry.err, HasSubstr("no Granary grain-library entry point"));

  ToolRun empty = RunTool(GRANARY_SILO_BINARY,
                          {"--check_config", "--grain_library=a.so,,b.so"});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_THAT(empty.err, HasSubstr("--grain_library: an empty path"));

  // Its grain types cannot be added: the start fails with the reason.
  std::vector<std::string> args = AnyPorts(TempDir("refused"));
  args.push_back("--grain_library=" + Library("refuses"));
  SiloProcess refused(args);
  EXPECT_EQ(refused.ReadyLine(), "");
  EXPECT_EQ(refused.Wait(absl::Seconds(30)), 2);
  EXPECT_THAT(refused.Stderr(),
              AllOf(HasSubstr("grain library refuses"),
                    HasSubstr("this library refuses on purpose")));
}

}  // namespace
}  // namespace granary::silo
