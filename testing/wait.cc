#include "testing/wait.h"

#include <chrono>
#include <thread>

#include "absl/time/clock.h"

namespace granary::testing {

bool WaitUntil(const std::function<bool()>& pred, absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  while (!pred()) {
    if (absl::Now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace granary::testing
