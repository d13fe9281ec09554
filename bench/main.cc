// granary-bench: the Granary load generator.
//
//   granary-bench --hosted                      # silo inside this process
//   granary-bench --hosted --scenarios=chain,ask --rounds=10
//   granary-bench --target=127.0.0.1:30000      # running silos, through the
//                                               # client SDK; adds raw_grpc
//   granary-bench --target=127.0.0.1:30000 --scenarios=ask,raw_grpc --rounds=5
//   granary-bench --target=127.0.0.1:30000 --scenarios=ask --concurrency=16
//   granary-bench --target=HOST:PORT,HOST:PORT  # several gateways
//
// Modes (exactly one): --hosted runs a silo in this process; --target runs
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
// one SUMMARY line per scenario, and after a remote run with both `ask` and
// `raw_grpc` (pooled p50s of the two summaries):
//   RATIO remote_ask_p50_over_raw_grpc_p50=<x.xx> remote_ask_p50_us=<a>
//         raw_grpc_p50_us=<b> ask_concurrency=<k>
// Rounds are interleaved across scenarios after a warm-up. Exits 1 when any
// round was not verified, 2 on bad flags or a gateway that cannot be used.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/lifecycle.h"
#include "bench/raw_echo.h"
#include "bench/remote.h"
#include "bench/failover.h"
#include "bench/scenarios.h"
#include "bench/stats.h"
#include "core/log.h"
#include "examples/bench_grain.h"
#include "silo/silo.h"
#include "storage/memory_storage.h"
#include "storage/rocksdb_storage.h"

ABSL_FLAG(bool, failover, false,
          "Mode: the failover scenario. Each round starts a dev cluster of "
          "--failover_silos granary-silo processes, activates "
          "--failover_grains grains, SIGKILLs one silo and measures how soon "
          "its grains answer again and whether any other grain was "
          "deactivated.");
ABSL_FLAG(std::string, silo_binary, "",
          "granary-silo for --failover (default: next to this binary).");
ABSL_FLAG(int32_t, failover_silos, 3, "Silos per --failover round (2..16).");
ABSL_FLAG(int32_t, failover_grains, 3000,
          "Grains per --failover round (1..1000000).");
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
ABSL_FLAG(bool, one_hop, true,
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
          "fresh temporary directory removed afterwards) or memory.");
ABSL_FLAG(std::string, json, "",
          "Also write every scenario summary to this file as JSON "
          "(bench/report.proto), for bench/make_results.py.");

namespace granary::bench {
namespace {

constexpr char kHostedScenarios[] =
    "activation,activation_one,oneway,oneway_spread,ask,chain,pingpong,fanout,"
    "create,wake,durable-write,warm-read";
constexpr char kRemoteScenarios[] =
    "activation,activation_one,oneway,oneway_spread,ask,chain,pingpong,fanout,"
    "create,wake,durable-write,warm-read,raw_grpc";
constexpr int kMaxConcurrency = 100000;

int Fail(const std::string& message) {
  std::fprintf(stderr, "granary-bench: %s\n", message.c_str());
  return 2;
}

int RunFailoverMode() {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (rounds < 1) return Fail("--rounds must be at least 1");
  FailoverOptions options;
  options.silos = absl::GetFlag(FLAGS_failover_silos);
  options.grains = absl::GetFlag(FLAGS_failover_grains);
  if (options.silos < 2 || options.silos > 16) {
    return Fail("--failover_silos must be in [2, 16]");
  }
  if (options.grains < 1 || options.grains > 1000000) {
    return Fail("--failover_grains must be in [1, 1000000]");
  }
  options.silo_binary = absl::GetFlag(FLAGS_silo_binary);
  if (options.silo_binary.empty()) {
    std::error_code ec;
    const std::filesystem::path self =
        std::filesystem::read_symlink("/proc/self/exe", ec);
    options.silo_binary = (self.parent_path() / "granary-silo").string();
  }
  std::vector<ScenarioResult> results;
  if (absl::Status s = RunFailover(options, rounds, &results); !s.ok()) {
    return Fail(s.ToString());
  }
  Report report("granary");
  report.Summarize("cluster", "failover", results, "grain");
  report.SetEnv("mode", "cluster");
  report.SetEnv("silos", absl::StrCat(options.silos));
  report.SetEnv("grains", absl::StrCat(options.grains));
  report.SetEnv("rounds", absl::StrCat(rounds));
  std::printf("ENV mode=cluster silos=%d grains=%d rounds=%d\n",
              options.silos, options.grains, rounds);
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

int Main() {
  LogLevel level;
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    return Fail("--log_level must be debug, info, warning or error");
  }
  SetLogLevel(level);
  const bool hosted = absl::GetFlag(FLAGS_hosted);
  const std::string target_flag = absl::GetFlag(FLAGS_target);
  if (absl::GetFlag(FLAGS_failover)) {
    if (hosted || !target_flag.empty()) {
      return Fail("--failover, --hosted and --target are mutually exclusive");
    }
    return RunFailoverMode();
  }
  if (hosted && !target_flag.empty()) {
    return Fail("--hosted and --target are mutually exclusive");
  }
  if (!hosted && target_flag.empty()) {
    return Fail("choose a mode: --hosted or --target=HOST:PORT[,...]");
  }
  if (hosted && !absl::GetFlag(FLAGS_one_hop)) {
    return Fail("--one_hop=false routes between gateways: it needs --target");
  }
  const char* mode = hosted ? "hosted" : "remote";
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const double scale = absl::GetFlag(FLAGS_scale);
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  if (rounds < 1) return Fail("--rounds must be at least 1");
  if (warmup < 0) return Fail("--warmup must not be negative");
  if (!(scale > 0) || scale > 1000) return Fail("--scale must be in (0, 1000]");
  if (concurrency < 1 || concurrency > kMaxConcurrency) {
    return Fail(
        absl::StrCat("--concurrency must be in [1, ", kMaxConcurrency, "]"));
  }
  if (absl::GetFlag(FLAGS_depth) < 1) return Fail("--depth must be at least 1");
  if (absl::GetFlag(FLAGS_fanout) < 1 || absl::GetFlag(FLAGS_fanout) > 1000) {
    return Fail("--fanout must be in [1, 1000]");
  }
  if (absl::GetFlag(FLAGS_workers) < 0)
    return Fail("--workers must not be negative");
  if (absl::GetFlag(FLAGS_turn_budget) < 1)
    return Fail("--turn_budget must be at least 1");
  if (absl::GetFlag(FLAGS_idle_spin) < 0)
    return Fail("--idle_spin must not be negative");
  std::string scenario_flag = absl::GetFlag(FLAGS_scenarios);
  if (scenario_flag.empty())
    scenario_flag = hosted ? kHostedScenarios : kRemoteScenarios;
  std::vector<std::string> scenarios =
      absl::StrSplit(scenario_flag, ',', absl::SkipEmpty());
  if (scenarios.empty()) return Fail("--scenarios is empty");
  for (const std::string& s : scenarios) {
    if (!IsScenario(s)) {
      return Fail(absl::StrCat("unknown scenario '", s, "' (known: ",
                               absl::StrJoin(ScenarioNames(), ","), ")"));
    }
    if (s == "raw_grpc" && hosted) {
      return Fail("raw_grpc compares with a remote silo: it needs --target");
    }
  }
  const bool wants_raw = std::find(scenarios.begin(), scenarios.end(),
                                   "raw_grpc") != scenarios.end();

  ScenarioContext ctx;
  ctx.scale = scale;
  ctx.chain_depth = absl::GetFlag(FLAGS_depth);
  ctx.fanout = absl::GetFlag(FLAGS_fanout);
  ctx.concurrency = concurrency;
  ctx.run_id = absl::StrCat(absl::Hex(absl::GetCurrentTimeNanos()));

  // Hosted mode: a silo here. Remote mode: clients of the gateways, and the
  // raw gRPC helper when asked for.
  silo::SiloOptions options;
  std::unique_ptr<silo::Silo> silo;
  BenchStats stats, state_stats;
  std::string storage_dir;
  std::unique_ptr<storage::GrainStorage> storage;
  std::unique_ptr<HostedLifecycle> hosted_lifecycle, hosted_state_lifecycle;
  std::unique_ptr<RemoteTarget> remote;
  std::unique_ptr<RawEchoArm> raw_echo;
  if (hosted) {
    options.name = "bench-silo";
    options.workers = absl::GetFlag(FLAGS_workers);
    options.turn_budget = absl::GetFlag(FLAGS_turn_budget);
    options.idle_spin = absl::GetFlag(FLAGS_idle_spin);
    const std::string storage_kind = absl::GetFlag(FLAGS_storage);
    if (storage_kind == "rocksdb") {
      storage_dir = (std::filesystem::temp_directory_path() /
                     absl::StrCat("granary-bench-", getpid()))
                        .string();
      std::filesystem::remove_all(storage_dir);
      storage::RocksDbOptions storage_options;
      storage_options.data_dir = storage_dir;
      auto opened = storage::RocksDbStorage::Open(storage_options);
      if (!opened.ok()) return Fail(opened.status().ToString());
      storage = *std::move(opened);
    } else if (storage_kind == "memory") {
      storage = std::make_unique<storage::MemoryStorage>();
    } else {
      return Fail("--storage must be rocksdb or memory");
    }
    options.storage = storage.get();
    silo = std::make_unique<silo::Silo>(options);
    if (absl::Status s = AddBenchGrains(*silo, &stats, &state_stats); !s.ok())
      return Fail(s.ToString());
    if (absl::Status s = silo->Start(); !s.ok()) return Fail(s.ToString());
    hosted_lifecycle = std::make_unique<HostedLifecycle>(&stats);
    hosted_state_lifecycle = std::make_unique<HostedLifecycle>(&state_stats);
    ctx.invoker = silo.get();
    ctx.lifecycle = hosted_lifecycle.get();
    ctx.state_lifecycle = hosted_state_lifecycle.get();
  } else {
    absl::StatusOr<std::vector<std::string>> gateways =
        ParseTargets(target_flag);
    if (!gateways.ok()) return Fail(std::string(gateways.status().message()));
    absl::StatusOr<std::unique_ptr<RemoteTarget>> connected =
        RemoteTarget::Connect(*gateways, concurrency, absl::GetFlag(FLAGS_one_hop));
    if (!connected.ok()) return Fail(std::string(connected.status().message()));
    remote = *std::move(connected);
    ctx.invoker = remote->invoker();
    ctx.cluster = gateways->size() > 1;
    if (ctx.cluster && !absl::GetFlag(FLAGS_one_hop)) {
      ctx.one_gateway = remote->first_gateway();
      ctx.one_gateway_silo = remote->silos().front().name();
    }
    ctx.lifecycle = remote->lifecycle();
    ctx.state_lifecycle = remote->state_lifecycle();
    RemoteTarget* target = remote.get();
    ctx.silo_resident_bytes = [target] { return target->SiloResidentBytes(); };
    if (wants_raw) {
      absl::StatusOr<std::unique_ptr<RawEchoArm>> arm = RawEchoArm::Start();
      if (!arm.ok()) return Fail(std::string(arm.status().message()));
      raw_echo = *std::move(arm);
      ctx.raw_echo = raw_echo.get();
    }
  }

  std::map<std::string, std::vector<ScenarioResult>> results;
  bool all_verified = true;
  int round_id = 0;
  for (int w = 0; w < warmup; ++w) {
    for (const std::string& s : scenarios) {
      ctx.round = round_id++;
      ScenarioResult r = RunScenario(s, ctx);
      if (!r.verified) {
        all_verified = false;
        Report::PrintResult(mode, r);
      }
    }
  }
  for (int round = 0; round < rounds; ++round) {
    // Interleave: each round runs every scenario once, starting at a
    // different one, so no scenario always runs first or last.
    for (size_t i = 0; i < scenarios.size(); ++i) {
      const std::string& s = scenarios[(i + round) % scenarios.size()];
      ctx.round = round_id++;
      ScenarioResult r = RunScenario(s, ctx);
      all_verified = all_verified && r.verified;
      Report::PrintResult(mode, r);
      results[s].push_back(std::move(r));
    }
  }
  Report report("granary");
  std::map<std::string, int64_t> p50s;
  for (const std::string& s : scenarios) {
    p50s[s] = report.Summarize(mode, s, results[s], ScenarioUnit(s));
  }
  if (!hosted && p50s.contains("ask") && p50s.contains("raw_grpc")) {
    const double ask_us = p50s["ask"] / 1000.0;
    const double raw_us = p50s["raw_grpc"] / 1000.0;
    std::printf(
        "RATIO remote_ask_p50_over_raw_grpc_p50=%.2f remote_ask_p50_us=%.2f "
        "raw_grpc_p50_us=%.2f ask_concurrency=%d\n",
        raw_us > 0 ? ask_us / raw_us : 0, ask_us, raw_us, concurrency);
  }
  report.SetEnv("mode", mode);
  report.SetEnv("scale", absl::StrCat(scale));
  report.SetEnv("rounds", absl::StrCat(rounds));
  report.SetEnv("warmup", absl::StrCat(warmup));
  report.SetEnv("concurrency", absl::StrCat(concurrency));
  if (hosted) {
    std::printf(
        "ENV mode=hosted workers=%d turn_budget=%d idle_spin=%d "
        "concurrency=%d scale=%g rounds=%d warmup=%d\n",
        silo->scheduler().workers(), options.turn_budget, options.idle_spin,
        concurrency, scale, rounds, warmup);
    report.SetEnv("workers", absl::StrCat(silo->scheduler().workers()));
    report.SetEnv("turn_budget", absl::StrCat(options.turn_budget));
    report.SetEnv("storage", absl::GetFlag(FLAGS_storage));
    silo->Stop();
    silo.reset();
    storage.reset();
    if (!storage_dir.empty()) std::filesystem::remove_all(storage_dir);
  } else {
    std::vector<std::string> names;
    for (const v1::SiloStatus& s : remote->silos()) names.push_back(s.name());
    std::printf(
        "ENV mode=remote target=%s silos=%s version=%s concurrency=%d "
        "scale=%g rounds=%d warmup=%d one_hop=%s\n",
        target_flag.c_str(), absl::StrJoin(names, ",").c_str(),
        remote->silos().front().version().c_str(), concurrency, scale, rounds,
        warmup, absl::GetFlag(FLAGS_one_hop) ? "true" : "false");
    report.SetEnv("target", target_flag);
    report.SetEnv("one_hop", absl::GetFlag(FLAGS_one_hop) ? "true" : "false");
    report.SetEnv("silos", absl::StrJoin(names, ","));
    if (raw_echo != nullptr) {
      if (absl::Status s = raw_echo->Stop(); !s.ok()) {
        std::fprintf(stderr, "granary-bench: raw gRPC helper: %s\n",
                     s.ToString().c_str());
      }
    }
    remote->Close();
  }
  std::fflush(stdout);
  if (const std::string json = absl::GetFlag(FLAGS_json); !json.empty()) {
    if (absl::Status s = report.WriteJson(json); !s.ok()) {
      std::fprintf(stderr, "granary-bench: %s\n", s.ToString().c_str());
      return 2;
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
      "Granary load generator. Examples: granary-bench --hosted --rounds=5; "
      "granary-bench --target=127.0.0.1:30000 --concurrency=16");
  absl::ParseCommandLine(argc, argv);
  return granary::bench::Main();
}
