#include "client/proto_check.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/git_source_tree.h"
#include "google/protobuf/compiler/importer.h"
#include "proto/codegen/interface_check.h"
#include "proto/codegen/proto_loader.h"

// Read by `proto check` from its own arguments (granary proto check
// --against=... -I ...), which may come in any order after `check`.
ABSL_FLAG(std::string, against, "",
          "For `proto check` (after it): the previous release to check "
          "against: a directory holding its .proto files at the paths they "
          "are imported by (a proto root, as for -I), or a git revision (a "
          "tag, a branch, HEAD~1) of the current directory's repository.");
ABSL_FLAG(std::vector<std::string>, proto_path, {},
          "For `proto check` (after it): the directories imports are found "
          "in, in order, comma-separated; also -I DIR, once a directory, as "
          "for protoc. Default: the current directory. granary/options.proto "
          "and google/protobuf's protos are built in.");

namespace granary::cli {
namespace {

namespace fs = std::filesystem;
namespace pb = ::google::protobuf;
using codegen::CheckFile;
using codegen::IsGrain;
using codegen::ProtoLoader;

constexpr char kProtoUsage[] =
    "granary proto check --against=DIR|REVISION [-I DIR]... FILE.proto...\n"
    "\n"
    "Checks the grain interfaces (services with the (granary.grain) option)\n"
    "of each FILE against their previous release: the same file in DIR, a\n"
    "proto root like an -I directory, or at a git revision of the\n"
    "repository of the current directory. A file the previous release lacks\n"
    "is new, so compatible. Exit status 0 when every interface is\n"
    "compatible, 1 naming each breaking change on stderr, 2 for a usage\n"
    "error.\n"
    "\n"
    "  --against=DIR|REVISION     the previous release\n"
    "  -I DIR, --proto_path=DIR   where imports are found, in order\n"
    "                             (default: the current directory);\n"
    "                             granary/options.proto and google/protobuf's\n"
    "                             protos are built in\n"
    "\n"
    "The rules: docs/upgrades.md.\n";

// Exit status 2: a usage error, with the usage; or input that cannot be
// checked, without.
int ProtoUsage(const std::string& problem) {
  std::cerr << "granary proto: " << problem << "\n\n" << kProtoUsage;
  return 2;
}
int BadInput(const std::string& problem) {
  std::cerr << "granary proto check: " << problem << "\n";
  return 2;
}

// `proto check`'s arguments into --against and --proto_path; the files into
// `files`.
absl::Status ParseCheckArgs(const std::vector<std::string>& args,
                            std::vector<std::string>* files) {
  std::vector<std::string> includes;
  std::string against;
  bool files_only = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (files_only || a.empty() || a[0] != '-') {
      files->push_back(a);
      continue;
    }
    std::string name = a;
    std::string value;
    bool has_value = false;
    if (a == "--") {
      files_only = true;
      continue;
    } else if (absl::StartsWith(a, "-I") && a != "-I") {
      name = "-I";
      value = a.substr(2);
      has_value = true;
    } else if (size_t eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    if (name != "-I" && name != "--proto_path" && name != "--against") {
      return absl::InvalidArgumentError(
          absl::StrCat("proto check has no option ", name));
    }
    if (!has_value) {
      if (i + 1 == args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      }
      value = args[++i];
    }
    if (value.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " is empty"));
    }
    if (name == "--against") {
      against = value;
    } else if (name == "-I") {
      includes.push_back(value);
    } else {
      for (absl::string_view dir :
           absl::StrSplit(value, ',', absl::SkipEmpty())) {
        includes.emplace_back(dir);
      }
    }
  }
  absl::SetFlag(&FLAGS_against, against);
  absl::SetFlag(&FLAGS_proto_path, includes);
  return absl::OkStatus();
}

// Paths compared as absolute ones: a file and the -I directory holding it
// may be given one relative, the other absolute.
std::string Absolute(const std::string& path) {
  std::error_code ec;
  std::string out = fs::absolute(path, ec).lexically_normal().string();
  if (ec) return path;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// A FILE as given, and the name it is imported by.
struct ProtoFile {
  std::string path;
  std::string name;
};

// The name `path` is imported by: its path below the first -I directory
// holding it.
absl::StatusOr<std::string> ImportName(pb::compiler::DiskSourceTree& tree,
                                       const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no such file"));
  }
  std::string name;
  std::string shadow;
  switch (tree.DiskFileToVirtualFile(Absolute(path), &name, &shadow)) {
    case pb::compiler::DiskSourceTree::SUCCESS:
      return name;
    case pb::compiler::DiskSourceTree::SHADOWED:
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is imported as ", name, ", which is ", shadow,
                       " (an earlier -I directory holds the same path)"));
    case pb::compiler::DiskSourceTree::CANNOT_OPEN:
      return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read"));
    case pb::compiler::DiskSourceTree::NO_MAPPING:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path,
                   " is in no -I directory (give the proto root it is imported "
                   "from with -I)"));
}

// The previous release's files: DIR, then the -I directories for what it
// lacks; or the -I directories at a git revision, then as they are now.
class PreviousRelease {
 public:
  static absl::StatusOr<std::unique_ptr<PreviousRelease>> Open(
      const std::string& against, const std::vector<std::string>& includes) {
    auto release = std::unique_ptr<PreviousRelease>(new PreviousRelease);
    std::error_code ec;
    pb::compiler::SourceTree* tree = &release->disk_;
    if (fs::is_directory(against, ec)) {
      release->dir_ = against;
      release->where_ = absl::StrCat("in ", against);
      std::vector<std::string> dirs = {against};
      dirs.insert(dirs.end(), includes.begin(), includes.end());
      codegen::MapDirectories(dirs, &release->disk_);
    } else {
      absl::StatusOr<std::string> commit = ResolveGitRevision(against);
      if (!commit.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--against: ", commit.status().message()));
      }
      release->where_ = absl::StrCat("at ", against);
      codegen::MapDirectories(includes, &release->disk_);
      release->git_ =
          std::make_unique<GitSourceTree>(*commit, includes, &release->disk_);
      tree = release->git_.get();
    }
    release->loader_ =
        std::make_unique<ProtoLoader>(tree, codegen::CompiledInDescriptors());
    return release;
  }

  // Whether the release has the file imported as `name`.
  bool Holds(const std::string& name) {
    std::error_code ec;
    if (git_ == nullptr) return fs::exists(fs::path(dir_) / name, ec);
    return git_->ReadAtCommit(name).has_value();
  }
  ProtoLoader& loader() { return *loader_; }
  // "in DIR" or "at REVISION".
  const std::string& where() const { return where_; }

 private:
  PreviousRelease() = default;

  std::string dir_;
  std::string where_;
  pb::compiler::DiskSourceTree disk_;
  std::unique_ptr<GitSourceTree> git_;  // null: a directory
  std::unique_ptr<ProtoLoader> loader_;
};

int Check(const std::vector<std::string>& args) {
  std::vector<std::string> paths;
  if (absl::Status s = ParseCheckArgs(args, &paths); !s.ok()) {
    return ProtoUsage(std::string(s.message()));
  }
  const std::string against = absl::GetFlag(FLAGS_against);
  std::vector<std::string> includes = absl::GetFlag(FLAGS_proto_path);
  if (paths.empty()) return ProtoUsage("proto check needs .proto files");
  if (against.empty()) {
    return ProtoUsage(
        "proto check needs --against=DIR|REVISION (the previous release)");
  }
  if (includes.empty()) includes.push_back(".");
  std::error_code ec;
  for (std::string& dir : includes) {
    if (!fs::is_directory(dir, ec)) {
      return BadInput(absl::StrCat("-I ", dir, ": no such directory"));
    }
    dir = Absolute(dir);
  }

  // The new release, as the files are now.
  pb::compiler::DiskSourceTree disk;
  codegen::MapDirectories(includes, &disk);
  ProtoLoader current(&disk, codegen::CompiledInDescriptors());
  std::vector<ProtoFile> files;
  std::set<std::string> seen;
  for (const std::string& path : paths) {
    absl::StatusOr<std::string> name = ImportName(disk, path);
    if (!name.ok()) return BadInput(std::string(name.status().message()));
    if (!seen.insert(*name).second) continue;
    if (absl::StatusOr<const pb::FileDescriptor*> file = current.Load(*name);
        !file.ok()) {
      return BadInput(
          absl::StrCat(path, " does not parse:\n", file.status().message()));
    }
    files.push_back({path, *name});
  }

  absl::StatusOr<std::unique_ptr<PreviousRelease>> previous =
      PreviousRelease::Open(against, includes);
  if (!previous.ok()) {
    return BadInput(std::string(previous.status().message()));
  }
  const std::string& baseline = (*previous)->where();

  int interfaces = 0;
  int problems = 0;
  int new_files = 0;
  for (const ProtoFile& f : files) {
    const pb::FileDescriptor* now = *current.Load(f.name);
    for (int i = 0; i < now->service_count(); ++i) {
      if (IsGrain(*now->service(i))) ++interfaces;
    }
    if (!(*previous)->Holds(f.name)) {  // new: nothing to break
      ++new_files;
      continue;
    }
    absl::StatusOr<const pb::FileDescriptor*> old =
        (*previous)->loader().Load(f.name);
    if (!old.ok()) {
      return BadInput(absl::StrCat("the previous release of ", f.path, " (",
                                   baseline, ") does not parse:\n",
                                   old.status().message()));
    }
    for (const std::string& p : CheckFile(**old, current.pool())) {
      std::cerr << f.path << ": " << p << "\n";
      ++problems;
    }
  }
  if (problems > 0) {
    std::cerr << "granary proto check: " << problems
              << (problems == 1 ? " problem" : " problems")
              << " against the previous release " << baseline
              << " (docs/upgrades.md)\n";
    return 1;
  }
  if (new_files == static_cast<int>(files.size())) {
    // Most likely a baseline at the wrong root, rather than all new files.
    std::cerr << "granary proto check: note: no file is in the previous "
                 "release "
              << baseline << ", where " << files[0].path << " would be "
              << files[0].name << ": all are new\n";
  }
  std::cout << interfaces
            << (interfaces == 1 ? " grain interface" : " grain interfaces")
            << " checked: compatible";
  if (new_files > 0) {
    std::cout << " (" << new_files << (new_files == 1 ? " file" : " files")
              << " new since the previous release)";
  }
  std::cout << "\n";
  return 0;
}

}  // namespace

std::optional<int> RunIfProtoCommand(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") return std::nullopt;
    if (absl::StartsWith(arg, "-")) continue;
    if (arg != "proto") return std::nullopt;
    absl::ParseCommandLine(i, argv);  // the flags before the command
    return RunProtoCommand(std::vector<std::string>(argv + i + 1, argv + argc));
  }
  return std::nullopt;
}

int RunProtoCommand(const std::vector<std::string>& args) {
  if (args.empty()) return ProtoUsage("proto needs a command: check");
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help" ||
      (args[0] == "check" && args.size() == 2 &&
       (args[1] == "--help" || args[1] == "-h"))) {
    std::cout << kProtoUsage;
    return 0;
  }
  if (args[0] != "check") {
    return ProtoUsage(absl::StrCat("unknown proto command '", args[0], "'"));
  }
  return Check(std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace granary::cli
