#include "bench/failover.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/postgres_db.h"
#include "bench/silo_process.h"
#include "client/client.h"
#include "core/status.h"
#include "core/sync.h"
#include "examples/bench.granary.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"

extern char** environ;

namespace granary::bench {
namespace {

using Silo = SiloProcess;

bool OnSilo(const std::string& where, const std::string& silo_address) {
  return absl::StartsWith(where, silo_address + "@");
}

// Whether `gateway`'s membership view has `silo_address` Dead.
bool SeenDead(v1::Gateway::Stub& stub, const std::string& silo_address) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  v1::MembershipView view;
  if (!stub.Cluster(&context, v1::ClusterRequest(), &view).ok()) return false;
  for (const v1::Member& m : view.members()) {
    if (m.address() == silo_address && m.status() == v1::MEMBER_DEAD) {
      return true;
    }
  }
  return false;
}

// What is the same for every round of a run.
struct RunSetup {
  const FailoverOptions* options;
  // cluster == "postgres": the file holding the connection string.
  std::string conninfo_file;
  std::mt19937_64 rng;
};

// The flags of silo `i` of a round's cluster.
std::vector<std::string> ClusterFlags(const RunSetup& setup,
                                      const std::string& cluster_id, int i,
                                      const std::string& primary) {
  if (setup.options->cluster == "postgres") {
    // Storage defaults to the same database.
    return {"--cluster=postgres",
            absl::StrCat("--postgres_file=", setup.conninfo_file),
            absl::StrCat("--cluster_id=", cluster_id)};
  }
  std::vector<std::string> flags = {"--cluster=dev", "--storage=memory"};
  if (i > 0) flags.push_back(absl::StrCat("--primary=", primary));
  return flags;
}

absl::Status RunRound(RunSetup& setup, int round, ScenarioResult* result) {
  const FailoverOptions& options = *setup.options;
  const bool on_postgres = options.cluster == "postgres";
  const std::string base =
      (std::filesystem::temp_directory_path() /
       absl::StrCat("granary-failover-", getpid(), "-", round))
          .string();
  const std::string cluster_id =
      absl::StrCat("failover-", getpid(), "-", round);
  // The victim: any silo of equal ones; in a dev cluster not the primary,
  // whose death is the whole cluster's.
  const int victim_index =
      on_postgres
          ? std::uniform_int_distribution<int>(0, options.silos - 1)(setup.rng)
          : std::uniform_int_distribution<int>(1, options.silos - 1)(setup.rng);
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  std::vector<std::unique_ptr<Silo>> silos;
  for (int i = 0; i < options.silos; ++i) {
    absl::StatusOr<std::unique_ptr<Silo>> s = Silo::Start(
        options.silo_binary, absl::StrCat(base, "/silo-", i),
        absl::StrCat(base, "/silo-", i, ".log"),
        ClusterFlags(setup, cluster_id, i, i == 0 ? "" : silos[0]->address()));
    if (!s.ok()) return s.status();
    silos.push_back(*std::move(s));
  }
  std::vector<std::string> gateways;
  for (const auto& s : silos) gateways.push_back(s->gateway());
  // Wait until every gateway sees every silo active.
  GRANARY_RETURN_IF_ERROR(WaitForActiveSilos(gateways.back(), options.silos));
  ClientOptions client_options;
  client_options.gateways = gateways;
  client_options.gateway_refresh_period = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(client_options);
  if (!client.ok()) return client.status();
  (void)(*client)->WaitForConnected(absl::Seconds(10));

  // Activate the grains (placement spreads them over the silos).
  const int n = options.grains;
  std::vector<std::string> home(static_cast<size_t>(n));
  std::atomic<int> failed{0};
  auto key = [round](int g) {
    return absl::StrCat("failover-", round, "-", g);
  };
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < options.threads; ++t) {
      threads.emplace_back([&, t] {
        for (int g = t; g < n; g += options.threads) {
          absl::StatusOr<std::string> w =
              WhereAnswer(**client, key(g), absl::Seconds(10));
          if (w.ok()) {
            home[static_cast<size_t>(g)] = *w;
          } else {
            failed.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  if (failed.load() > 0) {
    return absl::UnavailableError(
        absl::StrCat(failed.load(), " grains could not be activated"));
  }
  Silo& victim_silo = *silos[static_cast<size_t>(victim_index)];
  const std::string victim = victim_silo.address();
  const std::string& survivor_gateway =
      silos[victim_index == 0 ? 1 : 0]->gateway();
  std::vector<int> victims;
  for (int g = 0; g < n; ++g) {
    if (OnSilo(home[static_cast<size_t>(g)], victim)) victims.push_back(g);
  }

  // Kill, then call each of the victim's grains until it answers from a
  // survivor; meanwhile watch for the table's verdict.
  const absl::Time killed = absl::Now();
  victim_silo.Signal(SIGKILL);
  victim_silo.Wait();
  std::atomic<int64_t> detected_ns{0};
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    auto stub = v1::Gateway::NewStub(grpc::CreateChannel(
        survivor_gateway, grpc::InsecureChannelCredentials()));
    while (!done.load()) {
      if (SeenDead(*stub, victim)) {
        detected_ns = absl::ToInt64Nanoseconds(absl::Now() - killed);
        return;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  std::vector<int64_t> recovered(victims.size(), 0);
  std::vector<std::string> new_home(victims.size());
  {
    std::vector<std::thread> threads;
    const absl::Time give_up = killed + absl::Seconds(60);
    for (int t = 0; t < options.threads; ++t) {
      threads.emplace_back([&, t] {
        for (size_t i = static_cast<size_t>(t); i < victims.size();
             i += static_cast<size_t>(options.threads)) {
          while (absl::Now() < give_up) {
            absl::StatusOr<std::string> w =
                WhereAnswer(**client, key(victims[i]), absl::Seconds(1));
            if (w.ok() && !OnSilo(*w, victim)) {
              recovered[i] = absl::ToInt64Nanoseconds(absl::Now() - killed);
              new_home[i] = *w;
              break;
            }
            if (!w.ok()) absl::SleepFor(absl::Milliseconds(5));
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  done = true;
  watcher.join();

  // The survivors' grains: still the same activations?
  int disturbed = 0;
  for (int g = 0; g < n; ++g) {
    const std::string& was = home[static_cast<size_t>(g)];
    if (OnSilo(was, victim)) continue;
    absl::StatusOr<std::string> now =
        WhereAnswer(**client, key(g), absl::Seconds(10));
    if (!now.ok() || *now != was) ++disturbed;
  }
  (*client)->Close();
  // The primary of a dev cluster last: the others leave through its table.
  for (size_t i = silos.size(); i-- > 0;) silos[i]->Stop();
  std::filesystem::remove_all(base);
  if (on_postgres) {
    if (absl::Status s = DeleteBenchCluster(options.conninfo, cluster_id);
        !s.ok()) {
      std::fprintf(stderr,
                   "granary-bench: could not delete the rows of %s: %s\n",
                   cluster_id.c_str(), s.ToString().c_str());
    }
  }

  int64_t unrecovered = 0;
  result->scenario = "failover";
  result->ops = static_cast<int64_t>(victims.size());
  for (int64_t ns : recovered) {
    if (ns == 0) {
      ++unrecovered;
    } else {
      result->latencies_ns.push_back(ns);
    }
  }
  int64_t last = 0;
  for (int64_t ns : result->latencies_ns) last = std::max(last, ns);
  std::vector<int64_t> sorted = result->latencies_ns;
  std::sort(sorted.begin(), sorted.end());
  auto rank = [&sorted](double q) -> int64_t {
    if (sorted.empty()) return 0;
    const size_t i =
        static_cast<size_t>(q * static_cast<double>(sorted.size()));
    return sorted[std::min(sorted.size() - 1, i)];
  };
  result->p50_ns = rank(0.50);
  result->p99_ns = rank(0.99);
  result->seconds = static_cast<double>(last) / 1e9;
  result->errors = unrecovered + disturbed;
  result->verified = unrecovered == 0 && disturbed == 0 && !victims.empty();
  if (!result->verified) {
    result->failure =
        absl::StrCat(unrecovered, " grains never answered, ", disturbed,
                     " grains of surviving silos were disturbed");
  }
  std::printf(
      "FAILOVER round=%d cluster=%s seed=%llu victim=%d silos=%d grains=%d "
      "moved=%zu detection_ms=%.0f all_recovered_ms=%.0f disturbed=%d "
      "unrecovered=%lld\n",
      round, options.cluster.c_str(),
      static_cast<unsigned long long>(options.seed), victim_index,
      options.silos, n, victims.size(), detected_ns.load() / 1e6, last / 1e6,
      disturbed, static_cast<long long>(unrecovered));
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> WhereAnswer(Client& client, const std::string& key,
                                        absl::Duration timeout) {
  CallOptions options;
  options.timeout = timeout;
  absl::StatusOr<WhereReply> r =
      client.Get<BenchGrainRef>(key).Where(WhereRequest(), options).Get();
  if (!r.ok()) return r.status();
  return absl::StrCat(r->silo(), "/", r->activation_id());
}

absl::Status RunFailover(const FailoverOptions& options, int rounds,
                         std::vector<ScenarioResult>* results) {
  if (options.silos < 2) {
    return absl::InvalidArgumentError("failover needs at least 2 silos");
  }
  if (options.grains < 1) {
    return absl::InvalidArgumentError("failover needs at least 1 grain");
  }
  if (access(options.silo_binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no granary-silo at '", options.silo_binary, "' (--silo_binary)"));
  }
  if (options.cluster != "dev" && options.cluster != "postgres") {
    return absl::InvalidArgumentError("--cluster must be dev or postgres");
  }
  // The seed's two halves through a seed_seq: a clock reading given to
  // the engine directly can start it on a long run of one victim.
  std::seed_seq seed{static_cast<uint32_t>(options.seed),
                     static_cast<uint32_t>(options.seed >> 32)};
  RunSetup setup{&options, "", std::mt19937_64(seed)};
  std::string secret_dir;
  if (options.cluster == "postgres") {
    GRANARY_RETURN_IF_ERROR(MigrateBenchDatabase(options.conninfo));
    secret_dir =
        (std::filesystem::temp_directory_path() / "granary-failover-XXXXXX")
            .string();
    if (mkdtemp(secret_dir.data()) == nullptr) {
      return absl::UnavailableError("mkdtemp failed");
    }
    setup.conninfo_file = secret_dir + "/conninfo";
    if (absl::Status s = WriteSecretFile(setup.conninfo_file, options.conninfo);
        !s.ok()) {
      std::filesystem::remove_all(secret_dir);
      return s;
    }
  }
  absl::Status status;
  for (int r = 0; r < rounds && status.ok(); ++r) {
    ScenarioResult result;
    status = RunRound(setup, r, &result);
    if (!status.ok()) break;
    Report::PrintResult(FailoverMode(options), result);
    results->push_back(std::move(result));
  }
  if (!secret_dir.empty()) std::filesystem::remove_all(secret_dir);
  return status;
}

std::string FailoverMode(const FailoverOptions& options) {
  return options.cluster == "postgres" ? "cluster-postgres" : "cluster";
}

}  // namespace granary::bench
