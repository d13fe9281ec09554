#include "bench/overload.h"

#include <arpa/inet.h>
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

absl::StatusOr<std::unique_ptr<Client>> ConnectTo(const std::string& gateway) {
  ClientOptions options;
  options.gateways = {gateway};
  return Client::Connect(options);
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
  absl::StatusOr<std::unique_ptr<Client>> sender = ConnectTo((*silo)->gateway());
  if (!sender.ok()) return sender.status();
  absl::StatusOr<std::unique_ptr<Client>> calm = ConnectTo((*silo)->gateway());
  if (!calm.ok()) return calm.status();
  std::vector<BenchGrainRef> grains;
  for (int g = 0; g < options.grains; ++g) {
    grains.push_back(
        (*sender)->Get<BenchGrainRef>(absl::StrCat("overload-", round, "-", g)));
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
  const double capacity =
      static_cast<double>(after - before) /
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
