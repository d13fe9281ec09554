// File: silo/listener_watch.h
// -----------------------------------------------------------------------------
// Proves that the silo's gRPC listeners still accept, over their real
// ports, and says so in /readyz, /healthz and the metrics.
//
//   ListenerWatch watch(absl::Seconds(5));
//   watch.Add("gateway", "0.0.0.0:4000", 4000);   // probes 127.0.0.1:4000
//   watch.Start();
//   watch.NotReadyBecause();   // "" or why: the last probe failed
//   watch.UnhealthyBecause();  // "" or why: kDeadAfter probes in a row failed
//
// A listener that stops accepting (rpc/listener_guard.h says how gRPC's
// can) leaves its port bound and connections waiting in the kernel's
// backlog; nothing else in the silo notices. Each period a thread probes
// every listener (rpc::ProbeListener); one failed probe makes the silo not
// ready, kDeadAfter in a row make it unhealthy, so that its supervisor
// restarts it: a silo that runs, says ok and serves nothing is ruled out.
//
// Threading: thread-safe; Add before Start.
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "core/sync.h"

namespace granary::metrics {
class Registry;
}

namespace granary::silo {

class ListenerWatch {
 public:
  static constexpr int kDeadAfter = 3;

  // Probes every `period` (0: only ProbeAll), each waiting `probe_timeout`
  // for an answer.
  explicit ListenerWatch(absl::Duration period,
                         absl::Duration probe_timeout = absl::Seconds(2));
  ~ListenerWatch();
  ListenerWatch(const ListenerWatch&) = delete;
  ListenerWatch& operator=(const ListenerWatch&) = delete;

  // `name` labels it; `requested` is the HOST:PORT it was asked to listen
  // on (a wildcard host is probed on loopback), `port` the bound port.
  void Add(std::string name, const std::string& requested, int port);
  // Starts the probing thread (none when the period is zero).
  void Start();
  void Stop();
  // Probes every listener once, now (also what the thread does).
  void ProbeAll();

  std::string NotReadyBecause() const;
  std::string UnhealthyBecause() const;

  // granary_listener_accepting, granary_listener_connections and
  // granary_listener_refused_total, per listener.
  void RegisterMetrics(metrics::Registry* registry);

 private:
  struct Listener {
    std::string name;
    std::string probe_address;
    int port = 0;
    int failures = 0;  // probes failed in a row
    std::string last_error;
  };

  const absl::Duration period_;
  const absl::Duration probe_timeout_;
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<Listener> listeners_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The address to probe a listener asked for `requested` and bound to
// `port` on: its host, or loopback for a wildcard one.
std::string ProbeAddressOf(const std::string& requested, int port);

}  // namespace granary::silo
