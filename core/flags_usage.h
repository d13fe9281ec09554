// File: core/flags_usage.h
// -----------------------------------------------------------------------------
// What --help prints for a Granary program: the flags defined in Granary's
// own sources (Abseil's usage default matches only the flags of a file
// named after the program, so granary-silo --help found none), each under
// its source path from the project root.
//
//   int main(int argc, char** argv) {
//     granary::UseGranaryFlagsUsage();
//     absl::ParseCommandLine(argc, argv);
//
// Header-only: the caller links absl::flags_usage (it parses flags anyway).
#pragma once

#include <string>

#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace granary {

// `file` from the first of Granary's top-level folders on; as it is when
// none is in it.
inline std::string GranarySourcePath(absl::string_view file) {
  for (absl::string_view root :
       {"silo/", "client/", "core/", "rpc/", "storage/", "directory/",
        "examples/", "bench/", "tools/"}) {
    if (absl::StartsWith(file, root)) return std::string(file);
    const size_t at = file.rfind(absl::StrCat("/", root));
    if (at != absl::string_view::npos) return std::string(file.substr(at + 1));
  }
  return std::string(file);
}

inline void UseGranaryFlagsUsage() {
  absl::FlagsUsageConfig config;
  const auto ours = [](absl::string_view file) {
    return !absl::StrContains(file, "absl/");
  };
  config.contains_help_flags = ours;
  config.contains_helpshort_flags = ours;
  config.normalize_filename = GranarySourcePath;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace granary
