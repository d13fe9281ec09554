// The silo's periodic upkeep on its timer queue: collecting idle
// activations, and shedding them under memory pressure (--max_activations,
// --memory_limit; docs/architecture.md, "Memory bounds under overload").
#include "silo/runtime/idle_collection.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/metrics.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

void Runtime::CheckPressure() {
  const size_t n = catalog_.size();
  size_t shed = 0;
  if (options_.max_activations > 0) {
    const auto max = static_cast<size_t>(options_.max_activations);
    if (n * 10 > max * 9) shed = n - max * 8 / 10;
  }
  if (options_.memory_limit > 0) {
    const int64_t rss = metrics::ResidentBytes();
    const bool over = rss > options_.memory_limit;
    if (over != memory_over_.load(std::memory_order_relaxed)) {
      GRANARY_LOG(kWarning)
          << "silo=" << options_.name << " rss_mib=" << (rss >> 20)
          << " memory_limit_mib=" << (options_.memory_limit >> 20)
          << (over ? " over the memory limit: shedding idle activations and "
                     "refusing new ones"
                   : " back under the memory limit");
    }
    memory_over_.store(over, std::memory_order_relaxed);
    if (over) shed = std::max(shed, n / 10 + 1);
  }
  if (shed > 0) Shed(shed);
  if (!stopping()) {
    timers_.Schedule(pressure_check_.get(),
                     clock_->Now() + options_.pressure_period);
  }
}

void Runtime::Shed(size_t count) {
  std::vector<int64_t> last_active;
  last_active.reserve(catalog_.size());
  catalog_.ForEach(
      [&](Activation* a) { last_active.push_back(a->last_active_ns()); });
  if (last_active.empty()) return;
  count = std::min(count, last_active.size());
  std::nth_element(last_active.begin(),
                   last_active.begin() + static_cast<ptrdiff_t>(count - 1),
                   last_active.end());
  const int64_t cutoff = last_active[count - 1];
  size_t asked = 0;
  catalog_.ForEach([&](Activation* a) {
    if (asked < count && a->last_active_ns() <= cutoff) {
      a->RequestShed();
      ++asked;
    }
  });
  metrics_.shed_requests->Inc(asked);
}

absl::Status Runtime::MayActivate() {
  if (options_.max_activations > 0 &&
      catalog_.size() >= static_cast<size_t>(options_.max_activations)) {
    metrics_.activations_refused_max->Inc();
    return absl::ResourceExhaustedError(absl::StrCat(
        "silo ", options_.name, " holds its --max_activations of ",
        options_.max_activations,
        " activations and is deactivating idle ones: retry later"));
  }
  if (memory_over_.load(std::memory_order_relaxed)) {
    metrics_.activations_refused_memory->Inc();
    return absl::ResourceExhaustedError(absl::StrCat(
        "silo ", options_.name,
        " is over its --memory_limit and is deactivating idle activations: "
        "retry later"));
  }
  return absl::OkStatus();
}

void Runtime::CollectIdle() {
  const absl::Time now = clock_->Now();
  const int64_t idle_now = IdleClockNs();
  catalog_.ForEach([idle_now](Activation* a) { a->MaybeCollect(idle_now); });
  if (!stopping()) {
    timers_.Schedule(collector_.get(), now + options_.collection_period);
  }
}

}  // namespace granary::silo
