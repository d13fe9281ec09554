#include "bench/subcommand.h"

#include <algorithm>
#include <map>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

ABSL_DECLARE_FLAG(bool, hosted);         // bench/main.cc
ABSL_DECLARE_FLAG(bool, failover);       // bench/main.cc
ABSL_DECLARE_FLAG(std::string, target);  // bench/main.cc
ABSL_DECLARE_FLAG(bool, overload);       // bench/overload_mode.cc
ABSL_DECLARE_FLAG(bool, balance);        // bench/balance_mode.cc
ABSL_DECLARE_FLAG(bool, cluster_scale);  // bench/scale_mode.cc

namespace granary::bench {
namespace {

// The flags that belong to some modes only; a flag not named here (the
// counts, --json, --log_level, --silo_binary, ...) serves every mode.
const std::map<std::string, std::vector<std::string>>& ModeFlags() {
  static const auto* flags =
      new std::map<std::string, std::vector<std::string>>{
          {"target", {"remote"}},
          {"one_hop", {"remote"}},
          {"silo_pid", {"remote"}},
          {"tls_ca", {"remote"}},
          {"tls_cert", {"remote"}},
          {"tls_key", {"remote"}},
          {"token_file", {"remote"}},
          {"workers", {"hosted"}},
          {"turn_budget", {"hosted"}},
          {"idle_spin", {"hosted"}},
          {"storage", {"hosted"}},
          {"pgbench", {"hosted"}},
          {"scenarios", {"hosted", "remote"}},
          {"concurrency", {"hosted", "remote"}},
          {"depth", {"hosted", "remote"}},
          {"fanout", {"hosted", "remote"}},
          {"warmup", {"hosted", "remote"}},
          {"scale", {"hosted", "remote"}},
          {"profile", {"hosted", "remote"}},
          {"run_name", {"hosted", "remote"}},
          {"postgres", {"hosted", "failover", "balance", "scale"}},
          {"postgres_file", {"hosted", "failover", "balance", "scale"}},
          {"scale_silos", {"scale"}},
          {"scale_kill", {"scale"}},
          {"scale_grains", {"scale"}},
          {"scale_silo_flags", {"scale"}},
          {"balance_grains", {"balance"}},
          {"balance_ramp", {"balance"}},
          {"balance_measure", {"balance"}},
          {"cluster", {"failover"}},
          {"failover_silos", {"failover"}},
          {"failover_grains", {"failover"}},
          {"failover_seed", {"failover"}},
          {"overload_factor", {"overload"}},
          {"overload_time", {"overload"}},
          {"overload_phase_time", {"overload"}},
          {"overload_silo_flags", {"overload"}},
      };
  return *flags;
}

}  // namespace

absl::Status ApplySubcommand(const std::vector<std::string>& args) {
  if (args.empty()) return absl::OkStatus();  // the mode flags' form
  constexpr char kModes[] =
      "hosted, remote, failover, overload, balance or scale";
  if (args.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("one subcommand (", kModes, "), then flags; got '",
                     absl::StrJoin(args, " "), "'"));
  }
  const std::string& mode = args[0];
  if (mode != "hosted" && mode != "remote" && mode != "failover" &&
      mode != "overload" && mode != "balance" && mode != "scale") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown subcommand '", mode, "' (", kModes, ")"));
  }
  if (absl::GetFlag(FLAGS_hosted) || absl::GetFlag(FLAGS_failover) ||
      absl::GetFlag(FLAGS_overload) || absl::GetFlag(FLAGS_balance) ||
      absl::GetFlag(FLAGS_cluster_scale)) {
    return absl::InvalidArgumentError(
        "give the mode once: as the subcommand, without --hosted, "
        "--failover, --overload, --balance or --cluster_scale");
  }
  for (const auto& [name, modes] : ModeFlags()) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr || flag->CurrentValue() == flag->DefaultValue()) {
      continue;
    }
    if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " is not a flag of `", mode, "` (it is of `",
                       absl::StrJoin(modes, "` and `"), "`)"));
    }
  }
  if (mode == "remote" && absl::GetFlag(FLAGS_target).empty()) {
    return absl::InvalidArgumentError(
        "remote needs --target=HOST:PORT[,HOST:PORT...]");
  }
  if (mode == "hosted") absl::SetFlag(&FLAGS_hosted, true);
  if (mode == "failover") absl::SetFlag(&FLAGS_failover, true);
  if (mode == "overload") absl::SetFlag(&FLAGS_overload, true);
  if (mode == "balance") absl::SetFlag(&FLAGS_balance, true);
  if (mode == "scale") absl::SetFlag(&FLAGS_cluster_scale, true);
  return absl::OkStatus();
}

}  // namespace granary::bench
