#include "bench/scale.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/failover.h"
#include "bench/postgres_db.h"
#include "bench/silo_process.h"
#include "client/client.h"
#include "core/status.h"
#include "examples/bench.granary.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "storage/postgres/pg_connection.h"

namespace granary::bench {
namespace {

using Stub = std::unique_ptr<v1::Gateway::Stub>;

// `gateway`'s view: how many silos are Active, and whether `address` is.
struct Seen {
  bool ok = false;
  int active = 0;
  bool address_active = false;
};

Seen Look(v1::Gateway::Stub& stub, const std::string& address) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  v1::MembershipView view;
  Seen seen;
  if (!stub.Cluster(&context, v1::ClusterRequest(), &view).ok()) return seen;
  seen.ok = true;
  for (const v1::Member& m : view.members()) {
    if (m.status() != v1::MEMBER_ACTIVE) continue;
    ++seen.active;
    if (m.address() == address) seen.address_active = true;
  }
  return seen;
}

// "VmRSS:" (kB) and "Threads:" of /proc/PID/status.
void ProcessFigures(pid_t pid, double* rss_mb, int* threads) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  *rss_mb = 0;
  *threads = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kb = 0;
      in >> kb;
      *rss_mb = static_cast<double>(kb) / 1024;
    } else if (key == "Threads:") {
      in >> *threads;
    }
    in.ignore(1 << 16, '\n');
  }
}

// Transactions the database has run, committed or rolled back.
absl::StatusOr<int64_t> DatabaseXacts(const std::string& conninfo) {
  GRANARY_ASSIGN_OR_RETURN(
      std::unique_ptr<storage::PgConnection> db,
      storage::PgConnection::Connect(conninfo, absl::Seconds(5)));
  // The statistics of this backend's own work reach the view at its end;
  // the others' at most a second late.
  GRANARY_ASSIGN_OR_RETURN(
      storage::PgResult r,
      db->Exec("SELECT xact_commit + xact_rollback FROM pg_stat_database "
               "WHERE datname = current_database()"));
  if (r.rows() != 1) return absl::NotFoundError("no pg_stat_database row");
  return r.Int64(0, 0);
}

// The average size of `cluster`'s membership rows, in bytes.
absl::StatusOr<double> RowBytes(const std::string& conninfo,
                                const std::string& cluster) {
  GRANARY_ASSIGN_OR_RETURN(
      std::unique_ptr<storage::PgConnection> db,
      storage::PgConnection::Connect(conninfo, absl::Seconds(5)));
  GRANARY_ASSIGN_OR_RETURN(
      storage::PgResult r,
      db->Exec("SELECT coalesce(avg(octet_length(member)), 0)::bigint FROM "
               "granary_members WHERE cluster_id = $1",
               {cluster}));
  return static_cast<double>(r.Int64(0, 0));
}

template <typename T>
T Median(std::vector<T> v) {
  if (v.empty()) return T();
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `fn(i)` for i in [0, n) on `threads` threads.
template <typename Fn>
void Parallel(int n, int threads, Fn fn) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = t; i < n; i += threads) fn(i);
    });
  }
  for (std::thread& t : pool) t.join();
}

struct Run {
  const ScaleOptions& options;
  std::string base;
  std::string cluster_id;
  std::string conninfo_file;
  std::vector<std::unique_ptr<SiloProcess>> silos;
  std::vector<Stub> stubs;
  std::vector<bool> gone;
  bool keep_logs = false;  // a run that failed keeps them

  ~Run() {
    for (size_t i = silos.size(); i-- > 0;) {
      if (silos[i] != nullptr && !gone[i]) silos[i]->Stop();
    }
    std::error_code ec;
    if (keep_logs) {
      std::filesystem::remove(conninfo_file, ec);
      std::fprintf(stderr, "granary-bench: the silos' logs are in %s\n",
                   base.c_str());
    } else {
      std::filesystem::remove_all(base, ec);
    }
    (void)DeleteBenchCluster(options.conninfo, cluster_id);
  }

  // Starts every silo, `start_parallelism` at a time; the join time.
  absl::StatusOr<absl::Duration> StartAll() {
    const int n = options.silos;
    silos.resize(static_cast<size_t>(n));
    gone.assign(static_cast<size_t>(n), false);
    std::mutex mu;
    absl::Status failed;
    const absl::Time begin = absl::Now();
    Parallel(n, options.start_parallelism, [&](int i) {
      std::vector<std::string> flags = {
          "--cluster=postgres", absl::StrCat("--postgres_file=", conninfo_file),
          absl::StrCat("--cluster_id=", cluster_id),
          "--postgres_connections=1"};
      flags.insert(flags.end(), options.silo_flags.begin(),
                   options.silo_flags.end());
      absl::StatusOr<std::unique_ptr<SiloProcess>> s = SiloProcess::Start(
          options.silo_binary, absl::StrCat(base, "/silo-", i),
          absl::StrCat(base, "/silo-", i, ".log"), flags);
      std::lock_guard<std::mutex> lock(mu);
      if (s.ok()) {
        silos[static_cast<size_t>(i)] = *std::move(s);
      } else if (failed.ok()) {
        failed = s.status();
      }
    });
    for (auto& s : silos) {
      if (s == nullptr) continue;
      stubs.push_back(v1::Gateway::NewStub(grpc::CreateChannel(
          s->gateway(), grpc::InsecureChannelCredentials())));
    }
    GRANARY_RETURN_IF_ERROR(failed);
    // Every gateway sees every silo Active.
    const absl::Time give_up = absl::Now() + absl::Minutes(3);
    std::vector<bool> done(static_cast<size_t>(n), false);
    int left = n;
    while (left > 0) {
      for (int i = 0; i < n; ++i) {
        if (done[static_cast<size_t>(i)]) continue;
        if (Look(*stubs[static_cast<size_t>(i)], "").active == n) {
          done[static_cast<size_t>(i)] = true;
          --left;
        }
      }
      if (left > 0 && absl::Now() > give_up) {
        return absl::DeadlineExceededError(absl::StrCat(
            left, " of ", n, " silos never saw all ", n, " Active"));
      }
    }
    return absl::Now() - begin;
  }

  // Stops silo `i` gracefully; the time until every other live silo's
  // gateway stops showing it Active.
  absl::StatusOr<absl::Duration> ChangeSeen(int i) {
    const std::string address = silos[static_cast<size_t>(i)]->address();
    std::vector<int> watchers;
    for (int j = 0; j < options.silos; ++j) {
      if (j != i && !gone[static_cast<size_t>(j)]) watchers.push_back(j);
    }
    const absl::Time begin = absl::Now();
    silos[static_cast<size_t>(i)]->Signal(SIGTERM);
    std::vector<bool> seen(watchers.size(), false);
    size_t left = watchers.size();
    absl::Time last = begin;
    while (left > 0) {
      for (size_t w = 0; w < watchers.size(); ++w) {
        if (seen[w]) continue;
        const Seen s = Look(*stubs[static_cast<size_t>(watchers[w])], address);
        if (s.ok && !s.address_active) {
          seen[w] = true;
          --left;
          last = absl::Now();
        }
      }
      if (left > 0 && absl::Now() - begin > absl::Minutes(1)) {
        return absl::DeadlineExceededError(
            absl::StrCat(left, " silos never saw the stop of ", address));
      }
    }
    silos[static_cast<size_t>(i)]->Wait();
    gone[static_cast<size_t>(i)] = true;
    return last - begin;
  }

  std::vector<std::string> LiveGateways() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < silos.size(); ++i) {
      if (!gone[i]) out.push_back(silos[i]->gateway());
    }
    return out;
  }
};

bool OnSilo(const std::string& where, const std::string& address) {
  return absl::StartsWith(where, address + "@");
}

}  // namespace

absl::Status ValidateScaleOptions(const ScaleOptions& o) {
  if (o.silos < 3 || o.silos > 500) {
    return absl::InvalidArgumentError("--scale_silos must be in [3, 500]");
  }
  if (o.kill < 1 || o.kill > o.silos - 2) {
    return absl::InvalidArgumentError(
        "--scale_kill must be in [1, silos - 2] (one silo is stopped "
        "before the kill, one must survive it)");
  }
  if (o.grains < 1 || o.grains > 1000000) {
    return absl::InvalidArgumentError("--scale_grains must be in [1, 1000000]");
  }
  for (const std::string& f : o.silo_flags) {
    if (!absl::StartsWith(f, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--scale_silo_flags: '", f, "' is not a --flag=value"));
    }
  }
  if (o.threads < 1 || o.start_parallelism < 1) {
    return absl::InvalidArgumentError("scale: a thread count is below 1");
  }
  if (access(o.silo_binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no granary-silo at '", o.silo_binary, "' (--silo_binary)"));
  }
  if (o.conninfo.empty()) {
    return absl::InvalidArgumentError(
        "scale needs a PostgreSQL database (--postgres or --postgres_file)");
  }
  return absl::OkStatus();
}

absl::Status RunScale(const ScaleOptions& options, ScenarioResult* result,
                      ScaleFigures* figures) {
  GRANARY_RETURN_IF_ERROR(ValidateScaleOptions(options));
  GRANARY_RETURN_IF_ERROR(MigrateBenchDatabase(options.conninfo));
  Run run{options,
          (std::filesystem::temp_directory_path() /
           absl::StrCat("granary-scale-", getpid()))
              .string(),
          absl::StrCat("scale-", getpid()),
          "",
          {},
          {},
          {}};
  std::error_code ec;
  std::filesystem::create_directories(run.base, ec);
  std::filesystem::permissions(run.base, std::filesystem::perms::owner_all, ec);
  run.conninfo_file = run.base + "/conninfo";
  GRANARY_RETURN_IF_ERROR(WriteSecretFile(run.conninfo_file, options.conninfo));

  // 1. Join.
  run.keep_logs = true;  // until the run is through
  absl::StatusOr<absl::Duration> join = run.StartAll();
  if (join.status().code() == absl::StatusCode::kDeadlineExceeded) {
    // A cluster that never formed is this run's result, not a failure to
    // run it: the row says so (unverified), and the report shows why.
    result->scenario = "scale_kill";
    result->failure =
        absl::StrCat("the cluster never formed: ", join.status().message());
    figures->join_s = -1;
    std::printf("SCALE silos=%d join_s=never failure=\"%s\"\n", options.silos,
                result->failure.c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }
  if (!join.ok()) return join.status();
  figures->join_s = absl::ToDoubleSeconds(*join);
  if (absl::StatusOr<double> bytes = RowBytes(options.conninfo, run.cluster_id);
      bytes.ok()) {
    figures->row_bytes = *bytes;
  }

  // 2. A change: the last silo leaves gracefully.
  GRANARY_ASSIGN_OR_RETURN(absl::Duration seen,
                           run.ChangeSeen(options.silos - 1));
  figures->change_seen_ms = absl::ToDoubleMilliseconds(seen);

  // 3. Grains, then the quiet cluster's memory, threads and database load.
  ClientOptions client_options;
  client_options.gateways = run.LiveGateways();
  client_options.gateway_refresh_period = absl::Seconds(1);
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                           Client::Connect(client_options));
  (void)client->WaitForConnected(absl::Seconds(10));
  const int n = options.grains;
  auto key = [&](int g) { return absl::StrCat(run.cluster_id, "-", g); };
  std::vector<std::string> home(static_cast<size_t>(n));
  std::atomic<int> failed{0};
  Parallel(n, options.threads, [&](int g) {
    absl::StatusOr<std::string> w =
        WhereAnswer(*client, key(g), absl::Seconds(10));
    if (w.ok()) {
      home[static_cast<size_t>(g)] = *w;
    } else {
      failed.fetch_add(1);
    }
  });
  if (failed.load() > 0) {
    return absl::UnavailableError(
        absl::StrCat(failed.load(), " grains could not be activated"));
  }
  absl::StatusOr<int64_t> xacts_before = DatabaseXacts(options.conninfo);
  const absl::Time quiet_from = absl::Now();
  absl::SleepFor(absl::Seconds(10));
  absl::StatusOr<int64_t> xacts_after = DatabaseXacts(options.conninfo);
  if (xacts_before.ok() && xacts_after.ok()) {
    figures->db_xacts_per_s =
        static_cast<double>(*xacts_after - *xacts_before - 1) /
        absl::ToDoubleSeconds(absl::Now() - quiet_from);
  }
  std::vector<double> rss;
  std::vector<int> threads;
  for (size_t i = 0; i < run.silos.size(); ++i) {
    if (run.gone[i]) continue;
    double mb = 0;
    int t = 0;
    ProcessFigures(run.silos[i]->pid(), &mb, &t);
    rss.push_back(mb);
    threads.push_back(t);
  }
  figures->rss_mb_median = Median(rss);
  figures->rss_mb_max = *std::max_element(rss.begin(), rss.end());
  figures->threads_median = Median(threads);
  figures->threads_max = *std::max_element(threads.begin(), threads.end());

  // 4. Kill `kill` silos at once, spread over the cluster (silo 0 among
  // them: no silo is special).
  std::vector<int> victims;
  for (int v = 0; v < options.kill; ++v) {
    victims.push_back(v * (options.silos - 1) / options.kill);
  }
  auto victim_of = [&](const std::string& where) {
    for (int v : victims) {
      if (OnSilo(where, run.silos[static_cast<size_t>(v)]->address())) {
        return true;
      }
    }
    return false;
  };
  std::vector<int> moved;
  for (int g = 0; g < n; ++g) {
    if (victim_of(home[static_cast<size_t>(g)])) moved.push_back(g);
  }
  const absl::Time killed = absl::Now();
  for (int v : victims) run.silos[static_cast<size_t>(v)]->Signal(SIGKILL);
  for (int v : victims) {
    run.silos[static_cast<size_t>(v)]->Wait();
    run.gone[static_cast<size_t>(v)] = true;
  }
  std::vector<int64_t> recovered(moved.size(), 0);
  Parallel(static_cast<int>(moved.size()), options.threads, [&](int i) {
    const int g = moved[static_cast<size_t>(i)];
    while (absl::Now() - killed < absl::Minutes(1)) {
      absl::StatusOr<std::string> w =
          WhereAnswer(*client, key(g), absl::Seconds(1));
      if (w.ok() && !victim_of(*w)) {
        recovered[static_cast<size_t>(i)] =
            absl::ToInt64Nanoseconds(absl::Now() - killed);
        home[static_cast<size_t>(g)] = *w;
        return;
      }
      if (!w.ok()) absl::SleepFor(absl::Milliseconds(5));
    }
  });
  // The survivors' grains kept their activations; each grain answers from
  // one activation through two different gateways.
  std::atomic<int> disturbed{0}, duplicates{0};
  std::vector<std::unique_ptr<Client>> pair;
  for (const std::string& gateway : run.LiveGateways()) {
    if (pair.size() == 2) break;
    ClientOptions one;
    one.gateways = {gateway};
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(one);
    if (c.ok()) pair.push_back(*std::move(c));
  }
  const std::vector<bool> was_moved = [&] {
    std::vector<bool> v(static_cast<size_t>(n), false);
    for (int g : moved) v[static_cast<size_t>(g)] = true;
    return v;
  }();
  Parallel(n, options.threads, [&](int g) {
    absl::StatusOr<std::string> a =
        WhereAnswer(*pair.front(), key(g), absl::Seconds(10));
    absl::StatusOr<std::string> b =
        WhereAnswer(*pair.back(), key(g), absl::Seconds(10));
    if (a.ok() && b.ok() && *a != *b) duplicates.fetch_add(1);
    if (!was_moved[static_cast<size_t>(g)] &&
        (!a.ok() || *a != home[static_cast<size_t>(g)])) {
      disturbed.fetch_add(1);
    }
  });
  for (auto& c : pair) c->Close();
  client->Close();
  run.keep_logs = false;

  int unrecovered = 0;
  result->scenario = "scale_kill";
  result->ops = static_cast<int64_t>(moved.size());
  for (int64_t ns : recovered) {
    if (ns == 0) {
      ++unrecovered;
    } else {
      result->latencies_ns.push_back(ns);
    }
  }
  std::vector<int64_t> sorted = result->latencies_ns;
  std::sort(sorted.begin(), sorted.end());
  auto rank = [&](double q) -> int64_t {
    if (sorted.empty()) return 0;
    return sorted[std::min(
        sorted.size() - 1,
        static_cast<size_t>(q * static_cast<double>(sorted.size())))];
  };
  result->p50_ns = rank(0.5);
  result->p99_ns = rank(0.99);
  result->seconds =
      sorted.empty() ? 0 : static_cast<double>(sorted.back()) / 1e9;
  figures->disturbed = disturbed.load();
  figures->duplicates = duplicates.load();
  figures->unrecovered = unrecovered;
  result->errors = unrecovered + figures->disturbed + figures->duplicates;
  result->verified = result->errors == 0 && !moved.empty();
  if (!result->verified) {
    result->failure =
        absl::StrCat(unrecovered, " grains never answered, ",
                     figures->disturbed, " disturbed, ", figures->duplicates,
                     " duplicated", moved.empty() ? ", none was moved" : "");
  }
  std::printf(
      "SCALE silos=%d join_s=%.2f change_seen_ms=%.0f rss_mb_median=%.1f "
      "rss_mb_max=%.1f threads_median=%d threads_max=%d db_xacts_per_s=%.0f "
      "db_xacts_per_silo_s=%.2f row_bytes=%.0f kill=%d moved=%zu "
      "all_recovered_s=%.2f disturbed=%d duplicates=%d unrecovered=%d\n",
      options.silos, figures->join_s, figures->change_seen_ms,
      figures->rss_mb_median, figures->rss_mb_max, figures->threads_median,
      figures->threads_max, figures->db_xacts_per_s,
      figures->db_xacts_per_s / (options.silos - 1), figures->row_bytes,
      options.kill, moved.size(), result->seconds, figures->disturbed,
      figures->duplicates, unrecovered);
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace granary::bench
