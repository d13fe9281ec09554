#include "bench/overload.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/silo_process.h"
#include "bench/stats.h"
#include "client/client.h"
#include "core/sync.h"
#include "examples/bench.granary.h"
#include "rpc/listener_guard.h"

namespace granary::bench {
namespace {

// GET `path` of the HTTP endpoint at HOST:PORT: the response, or "".
std::string HttpGet(const std::string& address, const std::string& path) {
  std::vector<std::string> hp = absl::StrSplit(address, ':');
  int port = 0;
  if (hp.size() != 2 || !absl::SimpleAtoi(hp[1], &port)) return "";
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, hp[0].c_str(), &addr.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
    if (write(fd, request.data(), request.size()) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) {
        response.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return response;
}

// One-way messages the silo delivered to its grains so far; -1 when its
// metrics cannot be read.
int64_t OneWayDelivered(const std::string& http) {
  const std::string metrics = HttpGet(http, "/metrics");
  const std::string name =
      "\ngranary_messages_total{direction=\"in\",kind=\"one_way\"} ";
  const size_t at = metrics.find(name);
  if (at == std::string::npos) return -1;
  double v = 0;
  const size_t from = at + name.size();
  const size_t end = metrics.find('\n', from);
  if (!absl::SimpleAtod(metrics.substr(from, end - from), &v)) return -1;
  return static_cast<int64_t>(v);
}

// Samples a process's resident memory every 20 ms until stopped.
class PeakRss {
 public:
  explicit PeakRss(pid_t pid)
      : pid_(pid), base_(ResidentBytes(pid)), peak_(base_) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        peak_.store(std::max(peak_.load(), ResidentBytes(pid_)));
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }
  ~PeakRss() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  int64_t base() const { return base_; }
  int64_t peak() const { return peak_.load(); }

 private:
  const pid_t pid_;
  const int64_t base_;
  std::atomic<int64_t> peak_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Calls Ping on its own grains, one call at a time, until stopped.
class CalmCaller {
 public:
  explicit CalmCaller(Client* client) : client_(client) {
    thread_ = std::thread([this] {
      for (int64_t i = 0; !stop_.load(); ++i) {
        PingRequest ping;
        ping.set_seq(i);
        const int64_t start = absl::GetCurrentTimeNanos();
        absl::StatusOr<PingReply> reply =
            client_->Get<BenchGrainRef>(absl::StrCat("overload-calm-", i % 16))
                .Ping(ping)
                .Get();
        const int64_t took = absl::GetCurrentTimeNanos() - start;
        MutexLock lock(&mu_);
        if (reply.ok()) {
          latencies_ns_.push_back(took);
        } else {
          ++errors_;
        }
      }
    });
  }
  ~CalmCaller() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // Its samples and errors so far, cleared.
  std::vector<int64_t> Take(int64_t* errors) {
    MutexLock lock(&mu_);
    *errors = errors_;
    errors_ = 0;
    return std::exchange(latencies_ns_, {});
  }

 private:
  Client* const client_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Mutex mu_;
  std::vector<int64_t> latencies_ns_ ABSL_GUARDED_BY(mu_);
  int64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
};

// An attacker's connections to `address` (127.0.0.1:PORT), from source
// addresses 127.0.0.2 and up, `per_source` each, held until Stop: each one
// the silo closes is opened again at the next tick (every 0.5 s). A
// slowloris sends the start of an HTTP request, then one header line per
// tick, and never ends it.
class Attack {
 public:
  Attack(const std::string& address, int count, int per_source, bool slowloris)
      : count_(count),
        per_source_(std::max(1, per_source)),
        slowloris_(slowloris) {
    std::vector<std::string> hp = absl::StrSplit(address, ':');
    if (hp.size() == 2) (void)absl::SimpleAtoi(hp[1], &port_);
    thread_ = std::thread([this] { Run(); });
  }
  ~Attack() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  int64_t opened() const { return opened_.load(); }

 private:
  struct Slot {
    int fd = -1;
    bool head_sent = false;
  };

  int Open(int i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr =
        htonl((127u << 24) | (2u + static_cast<uint32_t>(i / per_source_)));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port_));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
        (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 &&
         errno != EINPROGRESS)) {
      close(fd);
      return -1;
    }
    opened_.fetch_add(1);
    return fd;
  }

  void Run() {
    std::vector<Slot> slots(static_cast<size_t>(count_));
    while (!stop_.load()) {
      for (size_t i = 0; i < slots.size() && !stop_.load(); ++i) {
        Slot& slot = slots[i];
        if (slot.fd >= 0) {
          char c;
          const ssize_t n = recv(slot.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
          const bool closed =
              n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                         errno != ENOTCONN);
          if (closed) {
            close(slot.fd);
            slot = Slot();
          }
        }
        if (slot.fd < 0) slot.fd = Open(static_cast<int>(i));
        if (slot.fd < 0 || !slowloris_) continue;
        const std::string line =
            slot.head_sent ? "X-Slow: 1\r\n"
                           : "GET /healthz HTTP/1.1\r\nHost: localhost\r\n";
        if (send(slot.fd, line.data(), line.size(),
                 MSG_DONTWAIT | MSG_NOSIGNAL) ==
            static_cast<ssize_t>(line.size())) {
          slot.head_sent = true;
        }
      }
      for (int t = 0; t < 10 && !stop_.load(); ++t) {
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
    for (Slot& slot : slots) {
      if (slot.fd >= 0) close(slot.fd);
    }
  }

  const int count_;
  const int per_source_;
  const bool slowloris_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> opened_{0};
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<Client>> ConnectTo(const std::string& gateway) {
  ClientOptions options;
  options.gateways = {gateway};
  return Client::Connect(options);
}

// One attack phase against `silo` while `calm` calls (see overload.h).
OverloadPhase RunPhase(const OverloadOptions& options, int round,
                       const std::string& name, SiloProcess& silo,
                       Client* calm) {
  OverloadPhase phase;
  phase.name = name;
  const bool flood = name == "flood";
  PeakRss rss(silo.pid());
  CalmCaller caller(calm);
  const std::string target = flood ? silo.gateway() : silo.http();
  Attack attack(
      target, flood ? options.flood_connections : options.slowloris_connections,
      flood ? options.flood_per_source : options.slowloris_connections,
      /*slowloris=*/!flood);
  const absl::Time end = absl::Now() + options.phase_time;
  while (absl::Now() < end) {
    const absl::Time start = absl::Now();
    bool ok = false;
    if (flood) {
      // A new client: does the listener still accept, and how soon?
      absl::StatusOr<std::unique_ptr<Client>> fresh = ConnectTo(silo.gateway());
      ok = fresh.ok() && (*fresh)
                             ->Get<BenchGrainRef>("overload-fresh")
                             .Ping(PingRequest())
                             .Get()
                             .ok();
    } else {
      ok = absl::StrContains(HttpGet(silo.http(), "/healthz"), " 200 ");
    }
    const int64_t took = absl::ToInt64Nanoseconds(absl::Now() - start);
    ++phase.probes;
    if (!ok) ++phase.probe_failures;
    phase.probe_slowest_ns = std::max(phase.probe_slowest_ns, took);
    absl::SleepFor(flood ? absl::Seconds(1) : absl::Milliseconds(100));
  }
  attack.Stop();
  caller.Stop();
  rss.Stop();
  std::vector<int64_t> latencies = caller.Take(&phase.calm_errors);
  phase.calm_calls = static_cast<int64_t>(latencies.size());
  phase.calm_p50_ns = NearestRank(latencies, 0.50);
  phase.calm_p99_ns = NearestRank(latencies, 0.99);
  phase.attack_opened = attack.opened();
  phase.rss_before = rss.base();
  phase.rss_peak = rss.peak();
  std::printf(
      "OVERLOAD_PHASE round=%d phase=%s attack_connections=%d opened=%lld "
      "calm_calls=%lld calm_errors=%lld calm_p50_us=%.1f calm_p99_us=%.1f "
      "%s=%lld %s_failures=%lld %s_slowest_ms=%.1f "
      "silo_rss_before_mib=%.1f silo_peak_rss_mib=%.1f\n",
      round, name.c_str(),
      flood ? options.flood_connections : options.slowloris_connections,
      static_cast<long long>(phase.attack_opened),
      static_cast<long long>(phase.calm_calls),
      static_cast<long long>(phase.calm_errors), phase.calm_p50_ns / 1e3,
      phase.calm_p99_ns / 1e3, flood ? "new_clients" : "healthz",
      static_cast<long long>(phase.probes), flood ? "new_client" : "healthz",
      static_cast<long long>(phase.probe_failures),
      flood ? "new_client" : "healthz", phase.probe_slowest_ns / 1e6,
      phase.rss_before / 1048576.0, phase.rss_peak / 1048576.0);
  std::fflush(stdout);
  return phase;
}

absl::Status RunRound(const OverloadOptions& options, int round,
                      ScenarioResult* result, OverloadFigures* figures) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() /
                       absl::StrCat("granary-overload-", getpid(), "-", round);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  absl::StatusOr<std::unique_ptr<SiloProcess>> silo =
      SiloProcess::Start(options.silo_binary, (dir / "data").string(),
                         (dir / "silo.log").string(), options.silo_flags);
  if (!silo.ok()) return silo.status();
  absl::StatusOr<std::unique_ptr<Client>> sender =
      ConnectTo((*silo)->gateway());
  if (!sender.ok()) return sender.status();
  absl::StatusOr<std::unique_ptr<Client>> calm = ConnectTo((*silo)->gateway());
  if (!calm.ok()) return calm.status();
  std::vector<BenchGrainRef> grains;
  for (int g = 0; g < options.grains; ++g) {
    grains.push_back((*sender)->Get<BenchGrainRef>(
        absl::StrCat("overload-", round, "-", g)));
    // Activated before the clock starts.
    if (absl::Status s = grains.back().Ping(PingRequest()).Get().status();
        !s.ok()) {
      return s;
    }
  }
  auto tell = [&](int64_t i) {
    TellRequest t;
    t.set_amount(1);
    grains[static_cast<size_t>(i % options.grains)].Tell(std::move(t));
  };

  // 1. Capacity: as fast as flow control lets one sender go.
  int64_t before = OneWayDelivered((*silo)->http());
  absl::Time start = absl::Now();
  for (int64_t i = 0; absl::Now() - start < options.capacity_time; ++i) {
    tell(i);
  }
  absl::SleepFor(absl::Milliseconds(200));  // the last batches land
  int64_t after = OneWayDelivered((*silo)->http());
  if (before < 0 || after < 0) {
    return absl::UnavailableError("the silo's /metrics could not be read");
  }
  const double capacity = static_cast<double>(after - before) /
                          absl::ToDoubleSeconds(absl::Now() - start);
  if (capacity <= 0) return absl::InternalError("the silo served nothing");
  // Let the silo drain what the capacity run left queued.
  for (int i = 0; i < 100; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    const int64_t now = OneWayDelivered((*silo)->http());
    if (now == after) break;
    after = now;
  }

  // 2 and 3. Open loop at `factor` × capacity, with a calm caller.
  const double offered_rate = capacity * options.factor;
  PeakRss rss((*silo)->pid());
  CalmCaller caller(calm->get());
  before = OneWayDelivered((*silo)->http());
  start = absl::Now();
  int64_t sent = 0;
  const double seconds = absl::ToDoubleSeconds(options.time);
  while (true) {
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    if (elapsed >= seconds) break;
    const auto due = static_cast<int64_t>(elapsed * offered_rate);
    if (sent >= due) {
      std::this_thread::yield();
      continue;
    }
    while (sent < due) tell(sent++);  // waits while the silo pushes back
  }
  after = OneWayDelivered((*silo)->http());
  const double took = absl::ToDoubleSeconds(absl::Now() - start);
  caller.Stop();
  rss.Stop();
  const auto offered = static_cast<int64_t>(seconds * offered_rate);
  const int64_t held_back = std::max<int64_t>(0, offered - sent);
  const int64_t served = after - before;
  int64_t calm_errors = 0;
  result->scenario = "overload";
  result->latencies_ns = caller.Take(&calm_errors);
  result->ops = static_cast<int64_t>(result->latencies_ns.size());
  result->seconds = took;
  result->errors = calm_errors;
  result->rss_delta_bytes = rss.peak() - rss.base();
  result->concurrency = 1;
  result->verified = calm_errors == 0 && served > 0;
  if (!result->verified) {
    result->failure = calm_errors > 0
                          ? absl::StrCat(calm_errors, " calm calls failed")
                          : "the silo served nothing";
  }
  const int64_t p50 = NearestRank(result->latencies_ns, 0.50);
  const int64_t p99 = NearestRank(result->latencies_ns, 0.99);
  std::printf(
      "OVERLOAD round=%d capacity_per_s=%.0f offered_per_s=%.0f "
      "served_per_s=%.0f served_over_capacity=%.2f sent=%lld held_back=%lld "
      "calm_calls=%zu calm_errors=%lld calm_p50_us=%.1f calm_p99_us=%.1f "
      "silo_rss_before_mib=%.1f silo_peak_rss_mib=%.1f\n",
      round, capacity, offered_rate, served / took, served / took / capacity,
      static_cast<long long>(sent), static_cast<long long>(held_back),
      result->latencies_ns.size(), static_cast<long long>(calm_errors),
      p50 / 1e3, p99 / 1e3, rss.base() / 1048576.0, rss.peak() / 1048576.0);
  std::fflush(stdout);
  figures->capacity = capacity;
  figures->offered = offered_rate;
  figures->served = served / took;
  figures->sent = sent;
  figures->held_back = held_back;
  figures->rss_before = rss.base();
  figures->rss_peak = rss.peak();
  if (options.phase_time > absl::ZeroDuration()) {
    for (const char* name : {"flood", "slowloris"}) {
      OverloadPhase phase = RunPhase(options, round, name, **silo, calm->get());
      if (phase.calm_errors > 0 || phase.probe_failures > 0) {
        result->verified = false;
        if (result->failure.empty()) {
          result->failure =
              absl::StrCat(name, ": ", phase.calm_errors, " calm calls and ",
                           phase.probe_failures, " probes failed");
        }
      }
      figures->phases.push_back(std::move(phase));
    }
  }
  calm->reset();
  sender->reset();
  (*silo)->Stop();
  fs::remove_all(dir, ec);
  return absl::OkStatus();
}

}  // namespace

void AddOverloadEnv(const OverloadOptions& options,
                    const std::vector<OverloadFigures>& figures,
                    Report* report) {
  const auto rounds = static_cast<int64_t>(figures.size());
  if (rounds == 0) return;
  report->SetEnv("mode", "overload");
  report->SetEnv("factor", absl::StrCat(options.factor));
  report->SetEnv("overload_seconds",
                 absl::StrCat(absl::ToDoubleSeconds(options.time)));
  report->SetEnv("rounds", absl::StrCat(rounds));
  // The rounds' means (peak RSS: the highest).
  OverloadFigures mean;
  for (const OverloadFigures& f : figures) {
    mean.capacity += f.capacity / rounds;
    mean.offered += f.offered / rounds;
    mean.served += f.served / rounds;
    mean.sent += f.sent / rounds;
    mean.held_back += f.held_back / rounds;
    mean.rss_before += f.rss_before / rounds;
    mean.rss_peak = std::max(mean.rss_peak, f.rss_peak);
  }
  report->SetEnv("capacity_per_s", absl::StrFormat("%.0f", mean.capacity));
  report->SetEnv("offered_per_s", absl::StrFormat("%.0f", mean.offered));
  report->SetEnv("served_per_s", absl::StrFormat("%.0f", mean.served));
  report->SetEnv("sent", absl::StrCat(mean.sent));
  report->SetEnv("held_back", absl::StrCat(mean.held_back));
  report->SetEnv("silo_rss_before_mib",
                 absl::StrFormat("%.1f", mean.rss_before / 1048576.0));
  report->SetEnv("silo_peak_rss_mib",
                 absl::StrFormat("%.1f", mean.rss_peak / 1048576.0));
  // The attack phases: means over the rounds, slowest and peaks the highest.
  for (const char* name : {"flood", "slowloris"}) {
    double p50 = 0, p99 = 0;
    int64_t calls = 0, errors = 0, failures = 0, slowest = 0, peak = 0, n = 0;
    for (const OverloadFigures& f : figures) {
      for (const OverloadPhase& ph : f.phases) {
        if (ph.name != name) continue;
        ++n;
        p50 += static_cast<double>(ph.calm_p50_ns);
        p99 += static_cast<double>(ph.calm_p99_ns);
        calls += ph.calm_calls;
        errors += ph.calm_errors;
        failures += ph.probe_failures;
        slowest = std::max(slowest, ph.probe_slowest_ns);
        peak = std::max(peak, ph.rss_peak);
      }
    }
    if (n == 0) continue;
    const std::string prefix = absl::StrCat(name, "_");
    report->SetEnv(prefix + "calm_p50_us",
                   absl::StrFormat("%.1f", p50 / n / 1e3));
    report->SetEnv(prefix + "calm_p99_us",
                   absl::StrFormat("%.1f", p99 / n / 1e3));
    report->SetEnv(prefix + "calm_calls", absl::StrCat(calls));
    report->SetEnv(prefix + "calm_errors", absl::StrCat(errors));
    report->SetEnv(prefix + "probe_failures", absl::StrCat(failures));
    report->SetEnv(prefix + "probe_slowest_ms",
                   absl::StrFormat("%.1f", slowest / 1e6));
    report->SetEnv(prefix + "silo_peak_rss_mib",
                   absl::StrFormat("%.1f", peak / 1048576.0));
  }
}

absl::Status RunOverload(const OverloadOptions& options, int rounds,
                         std::vector<ScenarioResult>* results,
                         std::vector<OverloadFigures>* figures) {
  if (access(options.silo_binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no granary-silo at '", options.silo_binary, "' (--silo_binary)"));
  }
  if (options.grains < 1) {
    return absl::InvalidArgumentError("overload needs at least 1 grain");
  }
  // The flood's descriptors: the soft open-file limit up to the hard one.
  if (options.phase_time > absl::ZeroDuration()) rpc::RaiseOpenFileLimit();
  for (int round = 0; round < rounds; ++round) {
    ScenarioResult r;
    OverloadFigures f;
    if (absl::Status s = RunRound(options, round, &r, &f); !s.ok()) return s;
    results->push_back(std::move(r));
    figures->push_back(f);
  }
  return absl::OkStatus();
}

}  // namespace granary::bench
