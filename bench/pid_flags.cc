// granary-bench's flags that name processes (bench/main_util.h).
#include <signal.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/main_util.h"

namespace granary::bench {

absl::StatusOr<std::vector<int>> ParsePids(
    absl::string_view flag, const std::vector<std::string>& texts) {
  std::vector<int> pids;
  for (const std::string& text : texts) {
    int pid = 0;
    if (!absl::SimpleAtoi(text, &pid)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", text, "' is not a process id"));
    }
    if (pid <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " must be positive"));
    }
    if (kill(pid, 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", pid, ": no such process here"));
    }
    pids.push_back(pid);
  }
  return pids;
}

}  // namespace granary::bench
