// What granary-bench's modes share (bench/main_util.h).
#include "bench/main_util.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "storage/postgres/pg_connection.h"

ABSL_DECLARE_FLAG(std::string, json);           // bench/main.cc
ABSL_DECLARE_FLAG(std::string, silo_binary);    // bench/main.cc
ABSL_DECLARE_FLAG(std::string, postgres);       // bench/main.cc
ABSL_DECLARE_FLAG(std::string, postgres_file);  // bench/main.cc

namespace granary::bench {

int Fail(const std::string& message) {
  std::fprintf(stderr, "granary-bench: %s\n", message.c_str());
  return 2;
}

// Writes --json if asked; 1 when a round was not verified, 2 when the report
// cannot be written.
int Finish(const Report& report, const std::vector<ScenarioResult>& results) {
  std::fflush(stdout);
  if (const std::string json = absl::GetFlag(FLAGS_json); !json.empty()) {
    if (absl::Status s = report.WriteJson(json); !s.ok()) {
      return Fail(s.ToString());
    }
  }
  for (const ScenarioResult& r : results) {
    if (!r.verified) return 1;
  }
  return 0;
}

std::string SiloBinaryFlag() {
  std::string binary = absl::GetFlag(FLAGS_silo_binary);
  if (binary.empty()) {
    std::error_code ec;
    const std::filesystem::path self =
        std::filesystem::read_symlink("/proc/self/exe", ec);
    binary = (self.parent_path() / "granary-silo").string();
  }
  return binary;
}

absl::StatusOr<std::string> RequiredConninfo(absl::string_view mode) {
  const std::string value = absl::GetFlag(FLAGS_postgres);
  const std::string file = absl::GetFlag(FLAGS_postgres_file);
  if (value.empty() && file.empty() &&
      std::getenv("GRANARY_POSTGRES") == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        mode, " needs a PostgreSQL database: --postgres_file=FILE"));
  }
  absl::StatusOr<std::string> conninfo = storage::ResolveConninfo(value, file);
  if (!conninfo.ok())
    return absl::InvalidArgumentError(conninfo.status().message());
  return conninfo;
}

}  // namespace granary::bench
