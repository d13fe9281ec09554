#include "bench/lifecycle.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace granary::bench {

absl::StatusOr<LifecycleCounts> HostedLifecycle::Read() {
  LifecycleCounts counts;
  counts.activations = stats_->activations();
  counts.deactivations = stats_->deactivations();
  return counts;
}

absl::Status HostedLifecycle::WaitForDeactivations(int64_t n,
                                                   absl::Duration limit) {
  if (stats_->WaitForDeactivations(n, limit)) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat(stats_->deactivations(), " of ", n, " deactivations after ",
                   absl::FormatDuration(limit)));
}

RemoteLifecycle::RemoteLifecycle(const std::vector<CallInvoker*>& silos,
                                 const std::vector<std::string>& keys,
                                 absl::Duration poll_period, Grains grains)
    : grains_(grains), poll_period_(poll_period) {
  for (size_t i = 0; i < silos.size(); ++i) {
    stats_.emplace_back(silos[i], keys[i]);
  }
}

absl::StatusOr<LifecycleCounts> RemoteLifecycle::Read() {
  LifecycleCounts counts;
  for (SiloStatsRef& silo : stats_) {
    absl::StatusOr<LifecycleReply> reply =
        grains_ == Grains::kBench
            ? silo.BenchLifecycle(LifecycleRequest()).Get()
            : silo.StateLifecycle(LifecycleRequest()).Get();
    if (!reply.ok()) return reply.status();
    counts.activations += reply->activations();
    counts.deactivations += reply->deactivations();
  }
  return counts;
}

absl::Status RemoteLifecycle::WaitForDeactivations(int64_t n,
                                                   absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  while (true) {
    absl::StatusOr<LifecycleCounts> counts = Read();
    if (!counts.ok()) return counts.status();
    if (counts->deactivations >= n) return absl::OkStatus();
    if (absl::Now() >= give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat(counts->deactivations, " of ", n,
                       " deactivations after ", absl::FormatDuration(limit)));
    }
    absl::SleepFor(poll_period_);
  }
}

}  // namespace granary::bench
