#include "core/process.h"

#include "absl/base/call_once.h"
#include "absl/synchronization/mutex.h"

namespace granary {

void InitProcess() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  });
}

}  // namespace granary
