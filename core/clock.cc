#include "core/clock.h"

#include <time.h>

#include <algorithm>

namespace granary {

int64_t MonoNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int64_t ClockNanos(const Clock& clock) {
  return clock.IsReal() ? MonoNanos() : absl::ToUnixNanos(clock.Now());
}

Clock* Clock::System() {
  static SystemClock* const clock = new SystemClock;  // never destroyed
  return clock;
}

absl::Time FakeClock::Now() const {
  MutexLock lock(&mu_);
  return now_;
}

int FakeClock::Subscribe(std::function<void()> fn) {
  MutexLock lock(&mu_);
  int id = next_id_++;
  subscribers_.emplace_back(id, std::move(fn));
  return id;
}

void FakeClock::Unsubscribe(int id) {
  MutexLock lock(&mu_);
  subscribers_.erase(
      std::remove_if(subscribers_.begin(), subscribers_.end(),
                     [id](const auto& s) { return s.first == id; }),
      subscribers_.end());
}

void FakeClock::Advance(absl::Duration d) {
  std::vector<std::function<void()>> wake;
  {
    MutexLock lock(&mu_);
    now_ += d;
    for (auto& [id, fn] : subscribers_) wake.push_back(fn);
  }
  for (auto& fn : wake) fn();
}

}  // namespace granary
