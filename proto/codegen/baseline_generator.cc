#include "proto/codegen/baseline_generator.h"

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/compiler/importer.h"
#include "google/protobuf/descriptor_database.h"
#include "proto/codegen/interface_check.h"
#include "proto/codegen/proto_loader.h"

namespace granary::codegen {

namespace pb = ::google::protobuf;

bool CheckAgainstBaseline(const pb::FileDescriptor& file,
                          const std::string& baseline_root,
                          const std::string& includes, std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(baseline_root, ec)) {
    *error = absl::StrCat("baseline ", baseline_root,
                          " is not a directory (baseline=DIR: the previous "
                          "release's proto root)");
    return false;
  }
  std::vector<std::string> dirs = {baseline_root};
  for (absl::string_view dir :
       absl::StrSplit(includes, ':', absl::SkipEmpty())) {
    if (!fs::is_directory(std::string(dir), ec)) {
      *error = absl::StrCat("baseline_include ", dir, " is not a directory");
      return false;
    }
    dirs.emplace_back(dir);
  }
  // A file the previous release lacks is new: nothing to break.
  if (!fs::exists(fs::path(baseline_root) / file.name(), ec)) return true;
  pb::compiler::DiskSourceTree tree;
  MapDirectories(dirs, &tree);
  pb::DescriptorPoolDatabase parsed_by_protoc(*file.pool());
  pb::MergedDescriptorDatabase fallback(&parsed_by_protoc,
                                        CompiledInDescriptors());
  ProtoLoader loader(&tree, &fallback);
  absl::StatusOr<const pb::FileDescriptor*> old = loader.Load(file.name());
  if (!old.ok()) {
    *error = absl::StrCat("the baseline in ", baseline_root,
                          " does not parse:\n", old.status().message());
    return false;
  }
  std::vector<std::string> problems = CheckFile(**old, *file.pool());
  if (problems.empty()) return true;
  *error =
      absl::StrCat("not compatible with the baseline in ", baseline_root,
                   " (docs/upgrades.md):\n", absl::StrJoin(problems, "\n"));
  return false;
}

bool BaselineCheckingGenerator::Generate(
    const pb::FileDescriptor* file, const std::string& parameter,
    pb::compiler::GeneratorContext* context, std::string* error) const {
  std::vector<std::pair<std::string, std::string>> params;
  pb::compiler::ParseGeneratorParameter(parameter, &params);
  bool check = false;
  std::string baseline;
  std::string includes;
  std::vector<std::string> rest;
  for (const auto& [key, value] : params) {
    if (key == "baseline") {
      check = true;
      baseline = value;
    } else if (key == "baseline_include") {
      includes = value;
    } else {
      rest.push_back(value.empty() ? key : absl::StrCat(key, "=", value));
    }
  }
  if (check && baseline.empty()) {
    *error = "baseline= needs a directory (baseline=DIR)";
    return false;
  }
  if (!check && !includes.empty()) {
    *error = "baseline_include is given without baseline=DIR";
    return false;
  }
  if (check && !CheckAgainstBaseline(*file, baseline, includes, error)) {
    return false;
  }
  return generator_.Generate(file, absl::StrJoin(rest, ","), context, error);
}

}  // namespace granary::codegen
