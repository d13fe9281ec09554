// Calls into an InProcessCluster (testing/in_process_cluster.h) hosting
// the Located and Hashed grains (tests/cluster_grains.proto), shared by the
// in-process cluster tests: a call is started, left in flight while the
// test moves the fake clock, and awaited on real time.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/sync.h"
#include "testing/in_process_cluster.h"
#include "tests/cluster_grains.h"

namespace granary::testing {

// A cluster of `silos` hosting the Located and Hashed grains; `tune`
// changes the silos' options.
inline InProcessClusterOptions Silos(
    int silos, std::function<void(silo::SiloHostOptions&)> tune = nullptr) {
  InProcessClusterOptions o;
  o.silos = silos;
  o.grains = [](silo::SiloHost& host) {
    (void)host.AddGrain<LocatedGrain>();
    (void)host.AddGrain<HashedGrain>();
  };
  if (tune) tune(o.host);
  return o;
}

// A call in flight: done() once it finished.
struct Pending {
  Notification finished;
  absl::StatusOr<clustertest::Location> result;
  bool done() const { return finished.HasBeenNotified(); }
};

inline std::shared_ptr<Pending> Start(Task<clustertest::Location> task) {
  auto p = std::make_shared<Pending>();
  Detach(std::move(task), [p](absl::StatusOr<clustertest::Location> r) {
    p->result = std::move(r);
    p->finished.Notify();
  });
  return p;
}

// The answer of a call, or DEADLINE_EXCEEDED when none came within a real
// minute (the fake clock never fires the call's own deadline).
inline absl::StatusOr<clustertest::Location> Await(
    const std::shared_ptr<Pending>& p) {
  if (!p->finished.WaitForNotificationWithTimeout(absl::Minutes(1))) {
    return absl::DeadlineExceededError("no answer");
  }
  return p->result;
}

inline absl::StatusOr<clustertest::Location> Where(silo::Runtime& via,
                                                   const std::string& key) {
  return Await(Start(via.Get<clustertest::LocatedRef>(key).Where(
      clustertest::WhereRequest())));
}

// A Located grain whose activation lives on silo `host`, placed there by a
// first call through it (random placement: some first calls place it
// elsewhere, so keys are tried until one lands).
inline std::string KeyLivingOn(InProcessCluster& c, int host,
                               const std::string& tag) {
  for (int k = 0;; ++k) {
    const std::string key = absl::StrCat(tag, k);
    absl::StatusOr<clustertest::Location> l = Where(c.silo(host), key);
    if (l.ok() && l->silo() == c.id(host)) return key;
  }
}

}  // namespace granary::testing
