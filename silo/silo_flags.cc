#include "silo/silo_flags.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "core/flags_usage.h"
#include "core/log.h"
#include "silo/silo_environment.h"
#include "silo/silo_host_option_table.h"
#include "storage/postgres/pg_connection.h"

// One flag per option of the table (silo/silo_host_option_table.h).
#define GRANARY_SILO_HOST_FLAG(type, name, default_value, help) \
  ABSL_FLAG(type, name, default_value, help);
GRANARY_SILO_HOST_OPTIONS(GRANARY_SILO_HOST_FLAG)
#undef GRANARY_SILO_HOST_FLAG

ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error.");
ABSL_FLAG(std::string, log_format, "text",
          "text (one line per event: time, level, key=value fields, message) "
          "or json (one JSON object per line).");
ABSL_FLAG(bool, check_config, false,
          "Check the configuration (flags, environment, config file, the files "
          "and certificates they name), print the effective flags with "
          "secrets redacted, and exit: 0 when the silo would start with "
          "them, 2 (with the reason) when not. Binds nothing and touches no "
          "database.");
ABSL_FLAG(std::string, config, "",
          "A file of these flags, one --name=value per line (# comments). "
          "Every flag may also come from the environment as GRANARY_<FLAG> "
          "(GRANARY_WORKERS=4 for --workers=4); the command line wins over "
          "the environment, which wins over this file.");

namespace granary::silo {
namespace {

// The binary's own flags (not Abseil's --flagfile, --help...), by name.
std::vector<std::pair<std::string, absl::CommandLineFlag*>> OwnFlags() {
  std::vector<std::pair<std::string, absl::CommandLineFlag*>> ours;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StrContains(flag->Filename(), "absl/")) {
      ours.emplace_back(std::string(name), flag);
    }
  }
  std::sort(ours.begin(), ours.end());
  return ours;
}

// The environment variable that may set flag `name`: GRANARY_<NAME>.
std::string EnvName(absl::string_view name) {
  return absl::StrCat("GRANARY_", absl::AsciiStrToUpper(name));
}

// Whether flag `name` is one of the binary's own that holds a list
// (comma-separated values). Abseil's own lists (--flagfile, --undefok, ...)
// keep their meaning.
bool IsListFlag(absl::string_view name) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && !absl::StrContains(flag->Filename(), "absl/") &&
         flag->IsOfType<std::vector<std::string>>();
}

// The name and value of "--name=value" (or "-name=value"); false for
// anything else.
bool SplitFlag(absl::string_view arg, absl::string_view* name,
               absl::string_view* value) {
  if (!absl::ConsumePrefix(&arg, "-")) return false;
  absl::ConsumePrefix(&arg, "-");
  const size_t eq = arg.find('=');
  if (eq == absl::string_view::npos) return false;
  *name = arg.substr(0, eq);
  *value = arg.substr(eq + 1);
  return true;
}

// A list flag may be given more than once (--grain_library=a.so
// --grain_library=b.so): its values add up, into one argument at the place
// of the first (Abseil would keep the last alone).
std::vector<std::string> MergeListFlags(std::vector<std::string> args) {
  std::vector<std::string> out;
  absl::flat_hash_map<std::string, size_t> at;  // list flag -> index in out
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {  // the rest are not flags
      out.insert(out.end(), args.begin() + i, args.end());
      break;
    }
    absl::string_view name, value;
    std::string spaced;
    if (!SplitFlag(args[i], &name, &value)) {
      // "--name value"
      absl::string_view bare = args[i];
      const bool dashed = absl::ConsumePrefix(&bare, "-");
      absl::ConsumePrefix(&bare, "-");
      if (dashed && i + 1 < args.size() && IsListFlag(bare)) {
        spaced = absl::StrCat("--", bare, "=", args[++i]);
        SplitFlag(spaced, &name, &value);
      } else {
        out.push_back(std::move(args[i]));
        continue;
      }
    }
    if (!IsListFlag(name)) {
      out.push_back(std::move(args[i]));
      continue;
    }
    auto [it, first] = at.try_emplace(std::string(name), out.size());
    if (first) {
      out.push_back(absl::StrCat("--", name, "=", value));
    } else if (!value.empty()) {
      std::string& merged = out[it->second];
      if (merged.back() != '=') merged += ',';
      absl::StrAppend(&merged, value);
    }
  }
  return out;
}

// The list flags a --config file gives more than once, merged (that file is
// read by Abseil, which would keep the last of each alone).
std::vector<std::string> MergedListFlagsOfFile(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    absl::string_view name, value;
    if (SplitFlag(trimmed, &name, &value) && IsListFlag(name)) {
      lines.emplace_back(trimmed);
    }
  }
  return MergeListFlags(std::move(lines));
}

// The arguments Abseil parses, in rising precedence: the `--config` file
// (read as an Abseil flag file), then GRANARY_<FLAG> variables for the
// binary's own flags, then the rest of the command line. A flag set from the
// environment to a value it does not take fails here, naming the variable.
std::vector<char*> ArgsWithConfigAndEnvironment(
    int argc, char** argv, std::deque<std::string>* storage) {
  std::string config;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--config=")) {
      config = arg.substr(9);
    } else if (arg == "--config" && i + 1 < argc) {
      config = argv[++i];
    } else {
      rest.push_back(arg);
    }
  }
  std::vector<std::string> from_env;
  for (const auto& [name, flag] : OwnFlags()) {
    const std::string var = EnvName(name);
    const char* value = std::getenv(var.c_str());
    if (value == nullptr) continue;
    if (name == "config") {
      if (config.empty()) config = value;
      continue;
    }
    // Checked here so that a bad value names its variable (the flag is set
    // again, in order, by the parse that follows).
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      std::fprintf(stderr, "%s: %s\n", var.c_str(), error.c_str());
      std::exit(2);
    }
    from_env.push_back(absl::StrCat("--", name, "=", value));
  }
  const size_t first = storage->size();
  storage->push_back(argv[0]);
  if (!config.empty()) {
    storage->push_back("--flagfile=" + config);
    for (auto& a : MergedListFlagsOfFile(config)) {
      storage->push_back(std::move(a));
    }
  }
  for (auto& a : from_env) storage->push_back(std::move(a));
  for (auto& a : MergeListFlags(std::move(rest))) {
    storage->push_back(std::move(a));
  }
  std::vector<char*> out;
  for (size_t i = first; i < storage->size(); ++i) {
    out.push_back((*storage)[i].data());
  }
  return out;
}

}  // namespace

void ParseSiloFlags(int argc, char** argv) {
  // Kept for the process's life: Abseil keeps pointers into argv (a deque,
  // so that strings already handed out never move).
  static auto* storage = new std::deque<std::string>;
  std::vector<char*> args = ArgsWithConfigAndEnvironment(argc, argv, storage);
  UseGranaryFlagsUsage();
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
}

absl::StatusOr<SiloHostOptions> SiloHostOptionsFromFlags() {
  LogLevel level;
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    return absl::InvalidArgumentError(
        "--log_level must be debug, info, warning or error");
  }
  SetLogLevel(level);
  LogFormat format;
  if (!ParseLogFormat(absl::GetFlag(FLAGS_log_format), &format)) {
    return absl::InvalidArgumentError("--log_format must be text or json");
  }
  SetLogFormat(format);
  SiloHostOptions o;
#define GRANARY_SILO_HOST_COPY(type, name, default_value, help) \
  o.name = absl::GetFlag(FLAGS_##name);
  GRANARY_SILO_HOST_OPTIONS(GRANARY_SILO_HOST_COPY)
#undef GRANARY_SILO_HOST_COPY
  if (absl::Status s = ValidateSiloHostOptions(o); !s.ok()) return s;
  if (absl::Status s = CheckProviderNames(o, DefaultProviders()); !s.ok()) {
    return s;
  }
  return o;
}

bool CheckConfigRequested() { return absl::GetFlag(FLAGS_check_config); }

std::string EffectiveConfig() {
  std::string out;
  for (const auto& [name, flag] : OwnFlags()) {
    if (name == "config" || name == "check_config") continue;
    std::string value = flag->CurrentValue();
    // A connection string may hold a password; every other secret is read
    // from a file the flag names.
    if (name == "postgres" && !value.empty()) {
      value = storage::RedactConninfo(value);
    }
    absl::StrAppend(&out, "--", name, "=", value, "\n");
  }
  return out;
}

}  // namespace granary::silo
