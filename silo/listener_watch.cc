#include "silo/listener_watch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/thread_top.h"
#include "rpc/listener_guard.h"

namespace granary::silo {
std::string ProbeAddressOf(const std::string& requested, int port) {
  std::string host;
  int unused = 0;
  if (!SplitHostPort(requested, &host, &unused)) host = "";
  if (!host.empty() && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos)
    return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

ListenerWatch::ListenerWatch(absl::Duration period,
                             absl::Duration probe_timeout)
    : period_(period), probe_timeout_(probe_timeout) {}

ListenerWatch::~ListenerWatch() { Stop(); }

void ListenerWatch::Add(std::string name, const std::string& requested,
                        int port) {
  MutexLock lock(&mu_);
  Listener l;
  l.name = std::move(name);
  l.probe_address = ProbeAddressOf(requested, port);
  l.port = port;
  listeners_.push_back(std::move(l));
}

void ListenerWatch::Start() {
  if (period_ <= absl::ZeroDuration() || thread_.joinable()) return;
  thread_ = std::thread([this] {
    RunThreadTop("listener_watch", [this] {
      MutexLock lock(&mu_);
      absl::Time next = absl::Now() + period_;
      while (!stopping_) {
        if (!cv_.WaitWithDeadline(&mu_, next) || stopping_) continue;
        mu_.Unlock();
        ProbeAll();
        mu_.Lock();
        next = absl::Now() + period_;
      }
    });
  });
}

void ListenerWatch::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void ListenerWatch::ProbeAll() {
  std::vector<std::pair<std::string, std::string>> targets;  // name, address
  {
    MutexLock lock(&mu_);
    for (const Listener& l : listeners_)
      targets.emplace_back(l.name, l.probe_address);
  }
  for (const auto& [name, address] : targets) {
    const absl::Status s = rpc::ProbeListener(address, probe_timeout_);
    if (absl::IsResourceExhausted(s)) {
      // No descriptor to probe with (a flood holds them): no verdict.
      GRANARY_LOG(kWarning)
          << "the " << name << " listener was not probed: " << s.message();
      continue;
    }
    MutexLock lock(&mu_);
    for (Listener& l : listeners_) {
      if (l.name != name) continue;
      if (s.ok()) {
        if (l.failures > 0) {
          GRANARY_LOG(kInfo) << "the " << name << " listener at " << address
                             << " accepts again";
        }
        l.failures = 0;
        l.last_error.clear();
      } else {
        ++l.failures;
        l.last_error = std::string(s.message());
        GRANARY_LOG(kError) << "the " << name << " listener at " << address
                            << " failed its probe (" << l.failures
                            << " in a row): " << s.message();
      }
    }
  }
}

std::string ListenerWatch::NotReadyBecause() const {
  MutexLock lock(&mu_);
  for (const Listener& l : listeners_) {
    if (l.failures > 0) {
      return absl::StrCat("the ", l.name,
                          " listener does not accept: ", l.last_error);
    }
  }
  return "";
}

std::string ListenerWatch::UnhealthyBecause() const {
  MutexLock lock(&mu_);
  for (const Listener& l : listeners_) {
    if (l.failures >= kDeadAfter) {
      return absl::StrCat("the ", l.name, " listener has not accepted for ",
                          l.failures, " probes in a row: ", l.last_error);
    }
  }
  return "";
}

void ListenerWatch::RegisterMetrics(metrics::Registry* registry) {
  registry->AddCallback(
      "granary_listener_accepting",
      "1 while the gRPC listener answered its last probe over its real "
      "port; 0 when it did not (see /readyz, /healthz).",
      metrics::Type::kGauge, {"listener"}, [this] {
        metrics::Samples out;
        MutexLock lock(&mu_);
        for (const Listener& l : listeners_) {
          out.push_back({{l.name}, l.failures == 0 ? 1.0 : 0.0});
        }
        return out;
      });
  registry->AddCallback(
      "granary_listener_connections",
      "Connections open on the gRPC listener (counted from accept to close).",
      metrics::Type::kGauge, {"listener"}, [this] {
        metrics::Samples out;
        MutexLock lock(&mu_);
        for (const Listener& l : listeners_) {
          out.push_back(
              {{l.name},
               static_cast<double>(rpc::GuardedListenerCounts(l.port).open)});
        }
        return out;
      });
  registry->AddCallback(
      "granary_listener_refused_total",
      "Connections closed as soon as they were accepted: reason "
      "max_connections or max_per_peer (--max_connections, "
      "--max_connections_per_peer), fd_limit (the open-file limit was "
      "reached), accept_error (another accept error, kept from gRPC).",
      metrics::Type::kCounter, {"listener", "reason"}, [this] {
        metrics::Samples out;
        MutexLock lock(&mu_);
        for (const Listener& l : listeners_) {
          const rpc::ListenerCounts c = rpc::GuardedListenerCounts(l.port);
          out.push_back({{l.name, "max_connections"},
                         static_cast<double>(c.refused_total)});
          out.push_back(
              {{l.name, "max_per_peer"}, static_cast<double>(c.refused_peer)});
          out.push_back(
              {{l.name, "fd_limit"}, static_cast<double>(c.shed_fd_limit)});
          out.push_back(
              {{l.name, "accept_error"}, static_cast<double>(c.accept_errors)});
        }
        return out;
      });
}

}  // namespace granary::silo
