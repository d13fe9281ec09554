// File: bench/subcommand.h
// -----------------------------------------------------------------------------
// granary-bench's subcommands: hosted, remote, failover and overload, one per
// mode. The subcommand sets the mode, and a flag that belongs to other modes
// only is refused (`hosted --target=...`, `remote --storage=postgres`).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace granary::bench {

// `args`: the positional arguments after the program name. Empty: the older
// form, a mode flag (--hosted, --target, --failover, --overload), which is
// left as it is. Otherwise exactly one subcommand; INVALID_ARGUMENT naming
// what is wrong: an unknown or second subcommand, a mode flag beside it, a
// flag of another mode, `remote` without --target.
absl::Status ApplySubcommand(const std::vector<std::string>& args);

}  // namespace granary::bench
