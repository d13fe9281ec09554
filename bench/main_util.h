// File: bench/main_util.h
// -----------------------------------------------------------------------------
// What granary-bench's modes share (bench/main.cc, bench/overload_mode.cc).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/report.h"

namespace granary::bench {

// Prints "granary-bench: MESSAGE" to stderr; returns 2 (bad flags, or a
// mode that could not run).
int Fail(const std::string& message);

// Writes --json if asked; returns the exit code: 1 when a round was not
// verified, 2 when the report cannot be written, else 0.
int Finish(const Report& report, const std::vector<ScenarioResult>& results);

// The process ids of a list flag (--silo_pid, --own_pids): positive, and
// each a process on this machine; INVALID_ARGUMENT naming the flag.
absl::StatusOr<std::vector<int>> ParsePids(
    absl::string_view flag, const std::vector<std::string>& texts);

// The connection string of --postgres, --postgres_file or GRANARY_POSTGRES
// for a mode that needs a database (`mode`: "balance", "scale");
// INVALID_ARGUMENT when none is given or it cannot be used.
absl::StatusOr<std::string> RequiredConninfo(absl::string_view mode);

// --silo_binary, or the granary-silo next to this binary.
std::string SiloBinaryFlag();

// The --overload mode (bench/overload_mode.cc): its exit code.
int RunOverloadMode();
// The --balance mode (bench/balance_mode.cc): its exit code.
int RunBalanceMode();
// The --cluster_scale mode (bench/scale_mode.cc): its exit code.
int RunScaleMode();

}  // namespace granary::bench
