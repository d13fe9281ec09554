#include "bench/balance.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/machine_load.h"
#include "bench/postgres_db.h"
#include "bench/silo_process.h"
#include "client/client.h"
#include "core/status.h"
#include "core/sync.h"
#include "examples/bench.granary.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace granary::bench {
namespace {

constexpr int kHotThreads = 2;
constexpr int kGrainThreads = 12;

// CPU ticks of one process (with its children).
int64_t Ticks(pid_t pid) {
  const int pids[] = {static_cast<int>(pid)};
  return ReadLoad(pids).own_ticks;
}

// What the callers of one round share.
struct Calls {
  Mutex mu;
  std::vector<int64_t> latencies_ns ABSL_GUARDED_BY(mu);  // while measured
  std::vector<std::string> failures ABSL_GUARDED_BY(mu);  // the first few
  std::vector<std::string> silo_of ABSL_GUARDED_BY(mu);   // per grain
  std::atomic<int64_t> measured_calls{0};
  std::atomic<int64_t> errors{0};
  std::atomic<bool> measuring{false};

  void Answered(int grain, absl::StatusOr<WhereReply> reply, int64_t ns) {
    if (!reply.ok()) {
      errors.fetch_add(1);
      MutexLock lock(&mu);
      if (failures.size() < 3) failures.push_back(reply.status().ToString());
      return;
    }
    const bool measured = measuring.load();
    if (measured) measured_calls.fetch_add(1);
    MutexLock lock(&mu);
    if (measured) latencies_ns.push_back(ns);
    if (grain >= 0) silo_of[static_cast<size_t>(grain)] = reply->silo();
  }
};

// One call of `Ref` (BalancedGrainRef, ScatteredGrainRef, HotGrainRef).
template <typename Ref>
void CallOnce(Client& client, const std::string& key, int grain,
              int64_t work_ns, Calls* calls) {
  WhereRequest request;
  request.set_work_ns(work_ns);
  CallOptions options;
  options.timeout = absl::Seconds(10);
  const absl::Time start = absl::Now();
  absl::StatusOr<WhereReply> reply =
      client.Get<Ref>(key).Where(request, options).Get();
  calls->Answered(grain, std::move(reply),
                  absl::ToInt64Nanoseconds(absl::Now() - start));
}

// Sleeps until `t`, or not at all when it has passed.
void SleepUntil(absl::Time t) {
  const absl::Duration left = t - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
}

// One strategy's round: `resource` picks BalancedGrain, else ScatteredGrain.
absl::Status RunOne(const BalanceOptions& options,
                    const std::string& conninfo_file, int round, bool resource,
                    ScenarioResult* result) {
  const std::string strategy = resource ? "resource" : "random";
  const std::string base =
      (std::filesystem::temp_directory_path() /
       absl::StrCat("granary-balance-", getpid(), "-", round, "-", strategy))
          .string();
  const std::string cluster_id =
      absl::StrCat("balance-", getpid(), "-", round, "-", strategy);
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  std::vector<std::unique_ptr<SiloProcess>> silos;
  absl::Status status;
  for (int i = 0; i < options.silos && status.ok(); ++i) {
    std::vector<std::string> flags = {
        "--cluster=postgres", absl::StrCat("--postgres_file=", conninfo_file),
        absl::StrCat("--cluster_id=", cluster_id)};
    if (i == 0) flags.push_back("--labels=bench=hot");
    absl::StatusOr<std::unique_ptr<SiloProcess>> s =
        SiloProcess::Start(options.silo_binary, absl::StrCat(base, "/silo-", i),
                           absl::StrCat(base, "/silo-", i, ".log"), flags);
    if (s.ok()) {
      silos.push_back(*std::move(s));
    } else {
      status = s.status();
    }
  }
  std::vector<std::string> gateways;
  for (const auto& s : silos) gateways.push_back(s->gateway());
  if (status.ok()) status = WaitForActiveSilos(gateways.back(), options.silos);
  std::unique_ptr<Client> client;
  if (status.ok()) {
    ClientOptions client_options;
    client_options.gateways = gateways;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(client_options);
    if (c.ok()) {
      client = *std::move(c);
      (void)client->WaitForConnected(absl::Seconds(10));
    } else {
      status = c.status();
    }
  }
  if (!status.ok()) {
    for (size_t i = silos.size(); i-- > 0;) silos[i]->Stop();
    std::filesystem::remove_all(base);
    (void)DeleteBenchCluster(options.conninfo, cluster_id);
    return status;
  }

  Calls calls;
  {
    MutexLock lock(&calls.mu);
    calls.silo_of.resize(static_cast<size_t>(options.grains));
  }
  // The skew comes first: the grains arrive in a cluster already skewed.
  const absl::Time skewed = absl::Now();
  const absl::Time start = skewed + options.ramp / 4;
  const absl::Time measure_from = start + options.ramp + options.settle;
  const absl::Time end = measure_from + options.measure;
  const absl::Duration spacing = options.ramp / options.grains;
  auto key = [&](int g) { return absl::StrCat(cluster_id, "-", g); };
  std::vector<std::thread> threads;
  // The skew: HotGrain calls at a steady rate, on the bench=hot silo.
  for (int t = 0; t < kHotThreads; ++t) {
    threads.emplace_back([&, t] {
      const absl::Duration every =
          absl::Seconds(kHotThreads / options.hot_rate);
      absl::Time next = skewed + every * t / kHotThreads;
      for (int i = t; absl::Now() < end; i += kHotThreads) {
        SleepUntil(next);
        CallOnce<HotGrainRef>(
            *client, absl::StrCat(cluster_id, "-hot-", i % options.hot_grains),
            -1, options.work_ns, &calls);
        // A caller that fell behind does not make up for it in a burst.
        next = std::max(next + every, absl::Now() - every);
      }
    });
  }
  // The grains under test: grain g is first called at start + g x spacing,
  // then grain_rate times a second; thread t calls grains t, t + 12, ...
  for (int t = 0; t < kGrainThreads; ++t) {
    if (t >= options.grains) break;
    threads.emplace_back([&, t] {
      size_t turn = 0;
      absl::Time next = start;
      while (absl::Now() < end) {
        std::vector<int> active;
        for (int g = t; g < options.grains; g += kGrainThreads) {
          if (start + spacing * g <= absl::Now()) active.push_back(g);
        }
        if (active.empty()) {
          next = start + spacing * t;
          SleepUntil(next);
          continue;
        }
        SleepUntil(next);
        const int g = active[turn++ % active.size()];
        if (resource) {
          CallOnce<BalancedGrainRef>(*client, key(g), g, options.work_ns,
                                     &calls);
        } else {
          CallOnce<ScatteredGrainRef>(*client, key(g), g, options.work_ns,
                                      &calls);
        }
        const absl::Duration every = absl::Seconds(
            1 / (options.grain_rate * static_cast<double>(active.size())));
        next = std::max(next + every, absl::Now() - every);
      }
    });
  }
  // Each silo's CPU over the measured span, and the machine's meanwhile.
  std::vector<int> pids;
  for (const auto& s : silos) pids.push_back(static_cast<int>(s->pid()));
  pids.push_back(static_cast<int>(getpid()));
  SleepUntil(measure_from);
  std::vector<int64_t> before;
  for (const auto& s : silos) before.push_back(Ticks(s->pid()));
  const LoadReading load_before = ReadLoad(pids);
  calls.measuring = true;
  SleepUntil(end);
  calls.measuring = false;
  std::vector<int64_t> used;
  for (size_t i = 0; i < silos.size(); ++i) {
    used.push_back(Ticks(silos[i]->pid()) - before[i]);
  }
  const LoadReading load_after = ReadLoad(pids);
  for (std::thread& t : threads) t.join();
  client->Close();
  for (size_t i = silos.size(); i-- > 0;) silos[i]->Stop();

  // Where the grains went, by silo index.
  std::vector<int> grains_on(silos.size(), 0);
  int unanswered = 0;
  std::vector<std::string> failures;
  {
    MutexLock lock(&calls.mu);
    for (const std::string& where : calls.silo_of) {
      bool found = false;
      for (size_t i = 0; i < silos.size(); ++i) {
        if (absl::StartsWith(where, silos[i]->address() + "@")) {
          ++grains_on[i];
          found = true;
        }
      }
      if (!found) ++unanswered;
    }
    result->latencies_ns = std::move(calls.latencies_ns);
    failures = calls.failures;
  }
  std::sort(result->latencies_ns.begin(), result->latencies_ns.end());
  auto rank = [&](double q) -> int64_t {
    const std::vector<int64_t>& v = result->latencies_ns;
    if (v.empty()) return 0;
    return v[std::min(v.size() - 1,
                      static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  const int64_t busiest = *std::max_element(used.begin(), used.end());
  const int64_t least = *std::min_element(used.begin(), used.end());
  result->scenario = resource ? kBalanceScenario : kBalanceRandomScenario;
  result->ops = calls.measured_calls.load();
  result->seconds = absl::ToDoubleSeconds(options.measure);
  result->p50_ns = rank(0.50);
  result->p99_ns = rank(0.99);
  result->errors = calls.errors.load() + unanswered;
  result->balance =
      least > 0 ? static_cast<double>(busiest) / static_cast<double>(least) : 0;
  result->load = LoadSince(load_before, load_after);
  result->verified = result->errors == 0;
  if (!result->verified) {
    result->failure =
        absl::StrCat(calls.errors.load(), " calls failed, ", unanswered,
                     " grains never answered", failures.empty() ? "" : ": ",
                     absl::StrJoin(failures, "; "));
  }
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::vector<std::string> cpu;
  for (int64_t u : used) {
    cpu.push_back(absl::StrFormat("%.2f", static_cast<double>(u) / tick));
  }
  std::printf(
      "BALANCE round=%d placement=%s silos=%d grains=%d cpu_s=%s "
      "busiest_over_least=%.2f grains_per_silo=%s\n",
      round, resource ? "RESOURCE_OPTIMIZED" : "RANDOM", options.silos,
      options.grains, absl::StrJoin(cpu, ",").c_str(), result->balance,
      absl::StrJoin(grains_on, ",").c_str());
  std::fflush(stdout);
  std::filesystem::remove_all(base);
  if (absl::Status s = DeleteBenchCluster(options.conninfo, cluster_id);
      !s.ok()) {
    std::fprintf(stderr, "granary-bench: could not delete the rows of %s: %s\n",
                 cluster_id.c_str(), s.ToString().c_str());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateBalanceOptions(const BalanceOptions& o) {
  if (o.silos < 2 || o.silos > 16) {
    return absl::InvalidArgumentError("balance needs 2 to 16 silos");
  }
  if (o.grains < 1 || o.grains > 10000) {
    return absl::InvalidArgumentError("--balance_grains must be in [1, 10000]");
  }
  if (o.ramp < absl::Seconds(1) || o.ramp > absl::Minutes(10)) {
    return absl::InvalidArgumentError("--balance_ramp must be in [1s, 10m]");
  }
  if (o.measure < absl::Seconds(1) || o.measure > absl::Minutes(10)) {
    return absl::InvalidArgumentError("--balance_measure must be in [1s, 10m]");
  }
  if (o.settle < absl::ZeroDuration() || o.work_ns < 0 ||
      o.work_ns > 10'000'000 || !(o.grain_rate > 0) || !(o.hot_rate > 0) ||
      o.hot_grains < 1) {
    return absl::InvalidArgumentError("balance: a size is out of range");
  }
  if (access(o.silo_binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no granary-silo at '", o.silo_binary, "' (--silo_binary)"));
  }
  if (o.conninfo.empty()) {
    return absl::InvalidArgumentError(
        "balance needs a PostgreSQL database (--postgres or --postgres_file)");
  }
  return absl::OkStatus();
}

absl::Status RunBalance(const BalanceOptions& options, int rounds,
                        std::vector<ScenarioResult>* resource,
                        std::vector<ScenarioResult>* random) {
  GRANARY_RETURN_IF_ERROR(ValidateBalanceOptions(options));
  GRANARY_RETURN_IF_ERROR(MigrateBenchDatabase(options.conninfo));
  std::string secret_dir =
      (std::filesystem::temp_directory_path() / "granary-balance-XXXXXX")
          .string();
  if (mkdtemp(secret_dir.data()) == nullptr) {
    return absl::UnavailableError("mkdtemp failed");
  }
  const std::string conninfo_file = secret_dir + "/conninfo";
  absl::Status status = WriteSecretFile(conninfo_file, options.conninfo);
  for (int r = 0; r < rounds && status.ok(); ++r) {
    // Which strategy goes first alternates, so that neither always runs on
    // a machine warmed (or tired) by the other.
    for (int i = 0; i < 2 && status.ok(); ++i) {
      const bool is_resource = (r + i) % 2 == 0;
      ScenarioResult result;
      status = RunOne(options, conninfo_file, r, is_resource, &result);
      if (!status.ok()) break;
      Report::PrintResult(kBalanceMode, result);
      (is_resource ? resource : random)->push_back(std::move(result));
    }
  }
  std::filesystem::remove_all(secret_dir);
  return status;
}

}  // namespace granary::bench
