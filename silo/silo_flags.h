// File: silo/silo_flags.h
// -----------------------------------------------------------------------------
// granary-silo's command-line flags, for any silo binary built on SiloHost:
// one flag per SiloHostOptions field, `--config=FILE` (the same flags, one
// per line), GRANARY_<FLAG> environment variables, and the log flags.
//
//   int main(int argc, char** argv) {
//     granary::silo::ParseSiloFlags(argc, argv);
//     absl::StatusOr<SiloHostOptions> options = SiloHostOptionsFromFlags();
//     if (!options.ok()) { ...print options.status().message(), exit 2... }
//     SiloHost host(*std::move(options));
//     ...
//   }
#pragma once

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "silo/silo_host_options.h"

namespace granary::silo {

// Parses the command line (exits on an unknown flag or --help). Each flag
// takes, in rising precedence, its value from `--config=FILE` (or
// GRANARY_CONFIG; the same flags, one per line), from the environment
// variable GRANARY_<FLAG> (--max_mailbox: GRANARY_MAX_MAILBOX), and from the
// command line. A variable with a value its flag does not take exits 2,
// naming the variable.
void ParseSiloFlags(int argc, char** argv);

// The options the flags give, after setting the process's log level and
// format from --log_level and --log_format. INVALID_ARGUMENT naming the
// flag that is wrong.
absl::StatusOr<SiloHostOptions> SiloHostOptionsFromFlags();

// True when --check_config was given: the caller prints EffectiveConfig()
// and exits 0 once SiloHostOptionsFromFlags() succeeded (2 when not).
bool CheckConfigRequested();

// The binary's own flags, one `--name=value` line each in name order, as
// they stand after parsing (a file --config could read back), with the
// password of --postgres redacted.
std::string EffectiveConfig();

}  // namespace granary::silo
