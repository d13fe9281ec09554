// granary-bench: the Granary load generator. One subcommand per mode:
//
//   granary-bench hosted                        # silo inside this process
//   granary-bench hosted --scenarios=chain,ask --rounds=10
//   granary-bench remote --target=127.0.0.1:30000
//                                               # running silos, through the
//                                               # client SDK; adds raw_grpc
//   granary-bench remote --target=127.0.0.1:30000 --scenarios=ask,raw_grpc
//   granary-bench remote --target=127.0.0.1:30000 --scenarios=ask
//   --concurrency=16 granary-bench remote --target=HOST:PORT,HOST:PORT  #
//   several gateways granary-bench hosted --storage=postgres
//   --postgres_file=FILE
//                                               # storage scenarios on
//                                               # PostgreSQL, and its floor
//   granary-bench failover --cluster=postgres --postgres_file=FILE
//   granary-bench overload --rounds=3           # a granary-silo offered 2x
//                                               # its one-way capacity
//   granary-bench balance --postgres_file=FILE  # placement under a skewed
//                                               # load (bench/balance.h)
//   granary-bench scale --postgres_file=FILE --scale_silos=100
//                                               # a large cluster
//                                               # (bench/scale.h)
//
// A flag of another mode (`hosted --target=...`, `remote --storage=...`) is
// refused, exit 2. The older form, a mode flag instead of the subcommand
// (--hosted, --target=..., --failover, --overload), still works.
//
// Modes: `hosted` runs a silo in this process; `remote --target` runs
// the same scenarios against granary-silo processes (which host BenchGrain)
// through granary::Client. Remote mode also offers `raw_grpc`: a plain gRPC
// bidirectional-stream ping-pong with a helper process (this binary again),
// measured in the same run, as the floor for `ask` (bench/raw_echo.h).
//
// --concurrency=K keeps K awaited Pings in flight in `ask` (K sequential
// loops over K grains); 1, the default, is one sequential loop.
//
// Prints one line per measured round:
//   RESULT scenario=<s> mode=<hosted|remote> ops=<n> seconds=<t>
//          rate=<ops/s> p50_us=<x> p99_us=<y> verified=<true|false>
//          errors=<n> rss_delta_kb=<n> [concurrency=<k>] [failure="..."]
// one SUMMARY line per scenario (with other_cores=<x> steal_cores=<y>: the
// cores the machine spent on other processes, and the hypervisor stole,
// during its rounds; bench/machine_load.h), and after a remote run with both
// `ask` and `raw_grpc` (pooled p50s of the two summaries, and the median of the
// per-round p50 ratios: the scenarios' rounds ran interleaved, side by side):
//   RATIO remote_ask_p50_over_raw_grpc_p50=<x.xx> median_round_ratio=<y.yy>
//         remote_ask_p50_us=<a> raw_grpc_p50_us=<b> ask_concurrency=<k>
// and after a run with `durable-write` on --storage=postgres and
// `postgres_floor` (pgbench's synced UPDATE on the same database):
//   RATIO durable_write_p50_over_postgres_floor_p50=<x.xx>
//         durable_write_p50_us=<a> postgres_floor_p50_us=<b>
// and after a hosted run with the call filter scenarios, for ask and chain:
//   RATIO ask_filtered_p50_over_ask_unfiltered_p50=<x.xxx>
//   median_round_ratio=... RATIO ask_unfiltered_p50_over_ask_p50=<x.xxx> ...
//   (A/A: two silos, no filters)
// Rounds are interleaved across scenarios after a warm-up. Exits 1 when any
// round was not verified, 2 on bad flags or a gateway that cannot be used.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/arm.h"
#include "bench/failover.h"
#include "bench/hosted_arm.h"
#include "bench/main_util.h"
#include "bench/profile.h"
#include "bench/raw_echo.h"
#include "bench/remote.h"
#include "bench/rounds.h"
#include "bench/scenario_util.h"
#include "bench/scenarios.h"
#include "bench/stats.h"
#include "bench/subcommand.h"
#include "client/security_flags.h"
#include "core/log.h"
#include "core/status.h"
#include "storage/postgres/pg_connection.h"

ABSL_FLAG(bool, failover, false,
          "Mode: the failover scenario. Each round starts a cluster "
          "(--cluster) of --failover_silos granary-silo processes, activates "
          "--failover_grains grains, SIGKILLs one silo and measures how soon "
          "its grains answer again and whether any other grain was "
          "deactivated.");
ABSL_FLAG(std::string, silo_binary, "",
          "granary-silo for --failover (default: next to this binary).");
ABSL_DECLARE_FLAG(bool, overload);       // bench/overload_mode.cc
ABSL_DECLARE_FLAG(bool, balance);        // bench/balance_mode.cc
ABSL_DECLARE_FLAG(bool, cluster_scale);  // bench/scale_mode.cc
ABSL_FLAG(int32_t, failover_silos, 3, "Silos per --failover round (2..16).");
ABSL_FLAG(int32_t, failover_grains, 3000,
          "Grains per --failover round (1..1000000).");
ABSL_FLAG(std::string, cluster, "dev",
          "--failover: the cluster each round starts. dev: silo 0 is the "
          "primary (it holds the table) and a random other silo is killed; "
          "postgres: equal silos (--cluster=postgres) on the database of "
          "--postgres, a fresh --cluster_id per round, and any silo may be "
          "killed.");
ABSL_FLAG(uint64_t, failover_seed, 0,
          "Seed of the --failover victims (0: from the clock); printed in "
          "every FAILOVER line.");
ABSL_FLAG(std::string, postgres, "",
          "With --failover --cluster=postgres or --hosted --storage=postgres: "
          "the libpq connection string (\"host=... dbname=...\" or "
          "postgresql://...). It may hold a password: prefer --postgres_file "
          "or the GRANARY_POSTGRES environment variable.");
ABSL_FLAG(std::string, postgres_file, "",
          "A file holding the connection string of --postgres.");
ABSL_FLAG(std::string, pgbench, "",
          "pgbench for the postgres_floor scenario (default: the newest "
          "/usr/lib/postgresql/*/bin/pgbench).");
ABSL_FLAG(bool, hosted, false, "Run a silo inside the benchmark process.");
ABSL_FLAG(std::string, target, "",
          "HOST:PORT[,...] of running gateways (granary-silo): run remotely "
          "through the client SDK.");
ABSL_FLAG(std::string, scenarios, "",
          "Comma-separated scenarios to run (default: "
          "every scenario but raw_grpc, which --target adds).");
ABSL_FLAG(int32_t, rounds, 5, "Measured rounds per scenario (at least 1).");
ABSL_FLAG(int32_t, warmup, 1, "Unreported warm-up rounds per scenario.");
ABSL_FLAG(double, scale, 1.0,
          "Multiplies every scenario's operation count (e.g. 0.01 for a smoke "
          "run).");
ABSL_FLAG(int32_t, concurrency, 1,
          "Awaited Pings `ask` keeps in flight (1..100000); with --target the "
          "silo's --max_in_flight must be at least this.");
ABSL_FLAG(int32_t, workers, 0,
          "Silo worker threads (0: hardware threads); --hosted only.");
ABSL_FLAG(int32_t, turn_budget, 64,
          "Messages per activation per scheduling; --hosted only.");
ABSL_FLAG(int32_t, depth, 5, "Depth of the chain scenario.");
ABSL_FLAG(bool, profile, false,
          "After the measured rounds, one more round per scenario with its "
          "processes watched: context switches, CPU time, and (where perf "
          "runs) system calls per operation (PROFILE lines; bench/profile.h).");
ABSL_FLAG(std::vector<std::string>, silo_pid, {},
          "--profile with --target: the silo processes on this machine, "
          "comma-separated, watched as the server side (\"silo\", then "
          "\"silo 2\", ...; none: client side only).");
ABSL_FLAG(std::vector<std::string>, own_pids, {},
          "Processes of the system under test on this machine (silos, a "
          "database server), comma-separated: their CPU time, and their "
          "children's, is the benchmark's own work, not other work on the "
          "machine (other_cores; bench/machine_load.h).");
ABSL_FLAG(std::string, run_name, "",
          "Reports this run's rows under NAME instead of its mode (hosted, "
          "remote, ...), so that a second run of the same mode has rows of "
          "its own in one report (make bench: hosted-filters).");
ABSL_FLAG(
    bool, one_hop, true,
    "With --target: send a grain's calls to the gateway of the silo that "
    "hosts it once a reply named it. false: to a gateway chosen by the "
    "grain's hash, which passes the call on to the grain's silo when that "
    "is another (in a 3-silo cluster, 2 calls in 3: cross-silo calls); "
    "`ask` then calls grains of other silos through the first gateway, "
    "so every ask crosses silos.");
ABSL_FLAG(int32_t, fanout, 10,
          "Leaves the fanout scenario's head grain calls at once (1..1000).");
ABSL_FLAG(int32_t, idle_spin, 200,
          "Pause instructions an idle silo worker spins before sleeping; "
          "--hosted only.");
ABSL_FLAG(std::string, log_level, "warning", "debug, info, warning or error.");
ABSL_FLAG(std::string, storage, "rocksdb",
          "--hosted: grain storage of the silo, rocksdb (sync writes, in a "
          "fresh temporary directory removed afterwards), memory, or "
          "postgres (the database of --postgres, migrated first, a cluster "
          "id of the run's own whose rows are deleted afterwards; the "
          "default scenarios are then the storage ones and postgres_floor).");
ABSL_FLAG(std::string, json, "",
          "Also write every scenario summary to this file as JSON "
          "(bench/report.proto), for bench/make_results.py.");

namespace granary::bench {

namespace {

constexpr char kHostedScenarios[] =
    "activation,activation_one,oneway,oneway_spread,ask,chain,pingpong,fanout,"
    "create,wake,durable-write,warm-read,ask_unfiltered,ask_filtered,"
    "chain_unfiltered,chain_filtered,hotspot,stateless,push";
constexpr char kRemoteScenarios[] =
    "activation,activation_one,oneway,oneway_spread,ask,chain,pingpong,fanout,"
    "create,wake,durable-write,warm-read,hotspot,stateless,push,raw_grpc";
constexpr char kPostgresScenarios[] =
    "create,wake,durable-write,warm-read,postgres_floor";
constexpr int kMaxConcurrency = 100000;

// The connection string of --postgres, --postgres_file or GRANARY_POSTGRES
// when `wanted` (a PostgreSQL mode was asked for); "" when not and neither
// flag is set. INVALID_ARGUMENT naming the flag when it is given where
// nothing uses it, or when it cannot be used.
absl::StatusOr<std::string> ConninfoFromFlags(bool wanted) {
  const std::string value = absl::GetFlag(FLAGS_postgres);
  const std::string file = absl::GetFlag(FLAGS_postgres_file);
  const char* flag = !value.empty()  ? "--postgres"
                     : !file.empty() ? "--postgres_file"
                                     : "GRANARY_POSTGRES";
  if (!wanted) {
    if (value.empty() && file.empty()) return std::string();
    return absl::InvalidArgumentError(
        absl::StrCat(flag,
                     " needs --cluster=postgres (with --failover) or "
                     "--storage=postgres (with --hosted)"));
  }
  absl::StatusOr<std::string> conninfo = storage::ResolveConninfo(value, file);
  if (!conninfo.ok()) {
    std::string message(conninfo.status().message());
    if (!absl::StrContains(message, "--postgres")) {
      message = absl::StrCat(flag, ": ", message);
    }
    return absl::InvalidArgumentError(message);
  }
  return conninfo;
}

int RunFailoverMode() {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (rounds < 1) return Fail("--rounds must be at least 1");
  FailoverOptions options;
  options.cluster = absl::GetFlag(FLAGS_cluster);
  absl::StatusOr<std::string> conninfo =
      ConninfoFromFlags(options.cluster == "postgres");
  if (!conninfo.ok()) return Fail(std::string(conninfo.status().message()));
  options.conninfo = *conninfo;
  options.seed = absl::GetFlag(FLAGS_failover_seed);
  if (options.seed == 0) {
    options.seed = static_cast<uint64_t>(absl::GetCurrentTimeNanos()) ^
                   (static_cast<uint64_t>(getpid()) << 32);
  }
  options.silos = absl::GetFlag(FLAGS_failover_silos);
  options.grains = absl::GetFlag(FLAGS_failover_grains);
  if (options.silos < 2 || options.silos > 16) {
    return Fail("--failover_silos must be in [2, 16]");
  }
  if (options.grains < 1 || options.grains > 1000000) {
    return Fail("--failover_grains must be in [1, 1000000]");
  }
  options.silo_binary = SiloBinaryFlag();
  std::vector<ScenarioResult> results;
  if (absl::Status s = RunFailover(options, rounds, &results); !s.ok()) {
    return Fail(s.ToString());
  }
  Report report("granary");
  const std::string mode = FailoverMode(options);
  report.Summarize(mode, "failover", results, "grain");
  report.SetEnv("mode", mode);
  report.SetEnv("cluster", options.cluster);
  report.SetEnv("seed", absl::StrCat(options.seed));
  report.SetEnv("silos", absl::StrCat(options.silos));
  report.SetEnv("grains", absl::StrCat(options.grains));
  report.SetEnv("rounds", absl::StrCat(rounds));
  std::printf("ENV mode=%s cluster=%s seed=%llu silos=%d grains=%d rounds=%d\n",
              mode.c_str(), options.cluster.c_str(),
              static_cast<unsigned long long>(options.seed), options.silos,
              options.grains, rounds);
  return Finish(report, results);
}

absl::Status CheckRanges(const RunConfig& c) {
  if (c.rounds < 1)
    return absl::InvalidArgumentError("--rounds must be at least 1");
  if (c.warmup < 0) {
    return absl::InvalidArgumentError("--warmup must not be negative");
  }
  if (!(c.scale > 0) || c.scale > 1000) {
    return absl::InvalidArgumentError("--scale must be in (0, 1000]");
  }
  if (c.concurrency < 1 || c.concurrency > kMaxConcurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("--concurrency must be in [1, ", kMaxConcurrency, "]"));
  }
  if (absl::GetFlag(FLAGS_depth) < 1) {
    return absl::InvalidArgumentError("--depth must be at least 1");
  }
  if (absl::GetFlag(FLAGS_fanout) < 1 || absl::GetFlag(FLAGS_fanout) > 1000) {
    return absl::InvalidArgumentError("--fanout must be in [1, 1000]");
  }
  if (absl::GetFlag(FLAGS_workers) < 0) {
    return absl::InvalidArgumentError("--workers must not be negative");
  }
  if (absl::GetFlag(FLAGS_turn_budget) < 1) {
    return absl::InvalidArgumentError("--turn_budget must be at least 1");
  }
  if (absl::GetFlag(FLAGS_idle_spin) < 0) {
    return absl::InvalidArgumentError("--idle_spin must not be negative");
  }
  return absl::OkStatus();
}

absl::Status ReadScenarios(RunConfig& c) {
  std::string flag = absl::GetFlag(FLAGS_scenarios);
  if (flag.empty()) {
    flag = !c.hosted                 ? kRemoteScenarios
           : c.storage == "postgres" ? kPostgresScenarios
                                     : kHostedScenarios;
  }
  c.scenarios = absl::StrSplit(flag, ',', absl::SkipEmpty());
  if (c.scenarios.empty()) {
    return absl::InvalidArgumentError("--scenarios is empty");
  }
  for (const std::string& s : c.scenarios) {
    if (!IsScenario(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown scenario '", s,
                       "' (known: ", absl::StrJoin(ScenarioNames(), ","), ")"));
    }
    if (s == "raw_grpc" && c.hosted) {
      return absl::InvalidArgumentError(
          "raw_grpc compares with a remote silo: it needs --target");
    }
    if (IsFilterScenario(s) && !c.hosted) {
      return absl::InvalidArgumentError(
          s +
          " compares silos with and without call filters: it needs "
          "--hosted");
    }
    if (s == "postgres_floor" && (!c.hosted || c.storage != "postgres")) {
      return absl::InvalidArgumentError(
          "postgres_floor measures the database of the grain storage: it "
          "needs --hosted --storage=postgres");
    }
  }
  auto wants = [&c](const char* s) {
    return std::find(c.scenarios.begin(), c.scenarios.end(), s) !=
           c.scenarios.end();
  };
  c.wants_raw = wants("raw_grpc");
  c.wants_floor = wants("postgres_floor");
  c.wants_filtered =
      std::any_of(c.scenarios.begin(), c.scenarios.end(),
                  [](const std::string& s) { return IsFilterScenario(s); });
  return absl::OkStatus();
}

// The run the flags ask for (not --failover); INVALID_ARGUMENT naming the
// flag that is wrong.
absl::StatusOr<RunConfig> ConfigFromFlags() {
  RunConfig c;
  c.hosted = absl::GetFlag(FLAGS_hosted);
  c.target = absl::GetFlag(FLAGS_target);
  c.profile = absl::GetFlag(FLAGS_profile);
  if (c.hosted && !c.target.empty()) {
    return absl::InvalidArgumentError(
        "--hosted and --target are mutually exclusive");
  }
  absl::StatusOr<std::vector<int>> silo_pids =
      ParsePids("silo_pid", absl::GetFlag(FLAGS_silo_pid));
  if (!silo_pids.ok()) return silo_pids.status();
  if (!silo_pids->empty() && (!c.profile || c.hosted)) {
    return absl::InvalidArgumentError(
        "--silo_pid names the silos --profile watches in a --target run");
  }
  c.silo_pids = *std::move(silo_pids);
  absl::StatusOr<std::vector<int>> own_pids =
      ParsePids("own_pids", absl::GetFlag(FLAGS_own_pids));
  if (!own_pids.ok()) return own_pids.status();
  c.own_pids = *std::move(own_pids);
  if (!c.hosted && c.target.empty()) {
    return absl::InvalidArgumentError(
        "choose a mode: --hosted or --target=HOST:PORT[,...]");
  }
  if (c.hosted && !absl::GetFlag(FLAGS_one_hop)) {
    return absl::InvalidArgumentError(
        "--one_hop=false routes between gateways: it needs --target");
  }
  c.storage = absl::GetFlag(FLAGS_storage);
  if (c.hosted && c.storage != "rocksdb" && c.storage != "memory" &&
      c.storage != "postgres") {
    return absl::InvalidArgumentError(
        "--storage must be rocksdb, memory or postgres");
  }
  GRANARY_ASSIGN_OR_RETURN(
      c.conninfo, ConninfoFromFlags(c.hosted && c.storage == "postgres"));
  // Rows on PostgreSQL are rows of their own in the report.
  c.workers = absl::GetFlag(FLAGS_workers);
  c.turn_budget = absl::GetFlag(FLAGS_turn_budget);
  c.idle_spin = absl::GetFlag(FLAGS_idle_spin);
  c.pgbench = absl::GetFlag(FLAGS_pgbench);
  GRANARY_ASSIGN_OR_RETURN(c.security, client::ClientSecurityFromFlags());
  if (c.hosted && (c.security.tls() || !c.security.token.empty())) {
    return absl::InvalidArgumentError(
        "--tls_ca and --token_file are for --target");
  }
  if (c.hosted) {
    c.mode = c.storage == "postgres" ? "hosted-postgres" : "hosted";
  } else if (c.security.tls()) {
    c.mode = "remote-tls";
  } else {
    // Every call passed on from one silo to another: rows of their own.
    c.mode = absl::GetFlag(FLAGS_one_hop) ? "remote" : "remote-cross";
  }
  if (const std::string name = absl::GetFlag(FLAGS_run_name); !name.empty()) {
    if (name.size() > 64 || !std::all_of(name.begin(), name.end(), [](char ch) {
          return absl::ascii_isalnum(static_cast<unsigned char>(ch)) ||
                 ch == '-';
        })) {
      return absl::InvalidArgumentError(
          "--run_name must be 1 to 64 letters, digits or '-'");
    }
    c.mode = name;
  }
  c.rounds = absl::GetFlag(FLAGS_rounds);
  c.warmup = absl::GetFlag(FLAGS_warmup);
  c.scale = absl::GetFlag(FLAGS_scale);
  c.concurrency = absl::GetFlag(FLAGS_concurrency);
  GRANARY_RETURN_IF_ERROR(CheckRanges(c));
  GRANARY_RETURN_IF_ERROR(ReadScenarios(c));
  return c;
}

// Clients of running gateways, and the raw gRPC helper when asked for.
class RemoteArm final : public Arm {
 public:
  explicit RemoteArm(const RunConfig& c) : config_(c) {}

  absl::Status Start(ScenarioContext* ctx) override {
    absl::StatusOr<std::vector<std::string>> gateways =
        ParseTargets(config_.target);
    if (!gateways.ok()) return gateways.status();
    absl::StatusOr<std::unique_ptr<RemoteTarget>> connected =
        RemoteTarget::Connect(*gateways, config_.concurrency,
                              absl::GetFlag(FLAGS_one_hop), absl::Seconds(5),
                              config_.security);
    if (!connected.ok()) return connected.status();
    remote_ = *std::move(connected);
    ctx->invoker = remote_->invoker();
    ctx->cluster = gateways->size() > 1;
    if (ctx->cluster && !absl::GetFlag(FLAGS_one_hop)) {
      ctx->one_gateway = remote_->first_gateway();
      ctx->one_gateway_silo = remote_->silos().front().name();
    }
    ctx->lifecycle = remote_->lifecycle();
    ctx->state_lifecycle = remote_->state_lifecycle();
    RemoteTarget* target = remote_.get();
    ctx->silo_resident_bytes = [target] { return target->SiloResidentBytes(); };
    if (config_.wants_raw) {
      absl::StatusOr<std::unique_ptr<RawEchoArm>> arm = RawEchoArm::Start();
      if (!arm.ok()) return arm.status();
      raw_echo_ = *std::move(arm);
      ctx->raw_echo = raw_echo_.get();
    }
    return absl::OkStatus();
  }

  void Finish(const RunConfig& c, Report& report) override {
    std::vector<std::string> names;
    for (const v1::SiloStatus& s : remote_->silos()) names.push_back(s.name());
    const char* one_hop = absl::GetFlag(FLAGS_one_hop) ? "true" : "false";
    std::printf(
        "ENV mode=%s target=%s silos=%s version=%s concurrency=%d "
        "scale=%g rounds=%d warmup=%d one_hop=%s\n",
        c.mode.c_str(), c.target.c_str(), absl::StrJoin(names, ",").c_str(),
        remote_->silos().front().version().c_str(), c.concurrency, c.scale,
        c.rounds, c.warmup, one_hop);
    report.SetEnv("target", c.target);
    report.SetEnv("one_hop", one_hop);
    report.SetEnv("tls", c.security.tls() ? "on" : "off");
    report.SetEnv("silos", absl::StrJoin(names, ","));
    if (raw_echo_ != nullptr) {
      if (absl::Status s = raw_echo_->Stop(); !s.ok()) {
        std::fprintf(stderr, "granary-bench: raw gRPC helper: %s\n",
                     s.ToString().c_str());
      }
    }
    remote_->Close();
  }

 private:
  const RunConfig& config_;
  std::unique_ptr<RemoteTarget> remote_;
  std::unique_ptr<RawEchoArm> raw_echo_;
};

int Main() {
  LogLevel level;
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    return Fail("--log_level must be debug, info, warning or error");
  }
  SetLogLevel(level);
  const std::string cluster = absl::GetFlag(FLAGS_cluster);
  if (cluster != "dev" && cluster != "postgres") {
    return Fail("--cluster must be dev or postgres");
  }
  if (cluster == "postgres" && !absl::GetFlag(FLAGS_failover)) {
    return Fail(
        "--cluster=postgres needs --failover (grain state on PostgreSQL: "
        "--hosted --storage=postgres)");
  }
  if (absl::GetFlag(FLAGS_cluster_scale)) {
    if (absl::GetFlag(FLAGS_hosted) || !absl::GetFlag(FLAGS_target).empty() ||
        absl::GetFlag(FLAGS_failover) || absl::GetFlag(FLAGS_overload) ||
        absl::GetFlag(FLAGS_balance)) {
      return Fail(
          "--cluster_scale, --balance, --overload, --failover, --hosted and "
          "--target are mutually exclusive");
    }
    return RunScaleMode();
  }
  if (absl::GetFlag(FLAGS_balance)) {
    if (absl::GetFlag(FLAGS_hosted) || !absl::GetFlag(FLAGS_target).empty() ||
        absl::GetFlag(FLAGS_failover) || absl::GetFlag(FLAGS_overload)) {
      return Fail(
          "--balance, --overload, --failover, --hosted and --target are "
          "mutually exclusive");
    }
    return RunBalanceMode();
  }
  if (absl::GetFlag(FLAGS_overload)) {
    if (absl::GetFlag(FLAGS_hosted) || !absl::GetFlag(FLAGS_target).empty() ||
        absl::GetFlag(FLAGS_failover)) {
      return Fail(
          "--overload, --failover, --hosted and --target are mutually "
          "exclusive");
    }
    return RunOverloadMode();
  }
  if (absl::GetFlag(FLAGS_failover)) {
    if (absl::GetFlag(FLAGS_hosted) || !absl::GetFlag(FLAGS_target).empty()) {
      return Fail("--failover, --hosted and --target are mutually exclusive");
    }
    return RunFailoverMode();
  }
  absl::StatusOr<RunConfig> config = ConfigFromFlags();
  if (!config.ok()) return Fail(std::string(config.status().message()));
  ScenarioContext ctx;
  ctx.scale = config->scale;
  ctx.chain_depth = absl::GetFlag(FLAGS_depth);
  ctx.fanout = absl::GetFlag(FLAGS_fanout);
  ctx.concurrency = config->concurrency;
  ctx.run_id = absl::StrCat(absl::Hex(absl::GetCurrentTimeNanos()));
  std::unique_ptr<Arm> arm;
  if (config->hosted) {
    arm = MakeHostedArm(*config);
  } else {
    arm = std::make_unique<RemoteArm>(*config);
  }
  if (absl::Status s = arm->Start(&ctx); !s.ok()) {
    return Fail(s.code() == absl::StatusCode::kInvalidArgument ||
                        !config->hosted
                    ? std::string(s.message())
                    : s.ToString());
  }
  std::map<std::string, std::vector<ScenarioResult>> results;
  const bool all_verified = RunRounds(*config, ctx, &results);
  Report report("granary");
  Summarize(*config, results, report);
  if (config->profile) ProfileRounds(*config, ctx, report);
  arm->Finish(*config, report);
  std::fflush(stdout);
  if (const std::string json = absl::GetFlag(FLAGS_json); !json.empty()) {
    if (absl::Status s = report.WriteJson(json); !s.ok()) {
      return Fail(s.ToString());
    }
  }
  return all_verified ? 0 : 1;
}

}  // namespace
}  // namespace granary::bench

int main(int argc, char** argv) {
  // The raw gRPC arm's helper process (bench/raw_echo.h): not a user flag.
  constexpr absl::string_view kServe = "--serve_raw_echo=";
  if (argc == 2 && absl::StartsWith(argv[1], kServe)) {
    return granary::bench::ServeRawEcho(argv[1] + kServe.size());
  }
  absl::SetProgramUsageMessage(
      "Granary load generator. granary-bench "
      "hosted|remote|failover|overload|balance|scale "
      "[flags]. Examples: granary-bench hosted --rounds=5; granary-bench "
      "remote --target=127.0.0.1:30000 --concurrency=16");
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = granary::bench::ApplySubcommand(
          std::vector<std::string>(positional.begin() + 1, positional.end()));
      !s.ok()) {
    return granary::bench::Fail(std::string(s.message()));
  }
  return granary::bench::Main();
}
