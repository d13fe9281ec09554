// Grains for the runtime tests, and the state they report into. Tests wait
// on that state (Mutex::Await with a generous limit), never on sleeps.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/sync.h"
#include "silo/runtime/runtime.h"
#include "tests/test_grains.grain.h"

namespace granary::testing {

struct TestState {
  Mutex mu;
  std::vector<std::string> log ABSL_GUARDED_BY(mu);
  std::map<std::string, int> activations ABSL_GUARDED_BY(mu);
  std::map<std::string, int> deactivations ABSL_GUARDED_BY(mu);
  int ticks ABSL_GUARDED_BY(mu) = 0;
  // Reminder ticks by "<grain key>/<reminder name>", and the activation ids
  // that ran them.
  std::map<std::string, int> reminder_ticks ABSL_GUARDED_BY(mu);
  std::map<std::string, std::vector<uint64_t>> reminder_activations
      ABSL_GUARDED_BY(mu);

  void Record(std::string entry) {
    MutexLock lock(&mu);
    log.push_back(std::move(entry));
  }
  std::vector<std::string> Log() {
    MutexLock lock(&mu);
    return log;
  }
  // Waits until `pred()` holds (evaluated under mu); false after 60 s, which
  // only a broken runtime reaches.
  template <typename Pred>
  bool WaitUntil(Pred pred) {
    MutexLock lock(&mu);
    return mu.AwaitWithTimeout(pred, absl::Seconds(60));
  }
  // Held by the note "gate" (TurnsGrain::Note) until opened.
  bool gate_open ABSL_GUARDED_BY(mu) = false;
  void OpenGate() {
    MutexLock lock(&mu);
    gate_open = true;
  }
  // Log entries equal to `entry`.
  int Count(const std::string& entry) {
    MutexLock lock(&mu);
    int n = 0;
    for (const auto& e : log) n += e == entry ? 1 : 0;
    return n;
  }
  bool WaitForLog(const std::string& entry) {
    return WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (const auto& e : log) {
        if (e == entry) return true;
      }
      return false;
    });
  }
};

// A Text holding `s`.
Text MakeText(std::string s);

// Registers every test grain (and the example Counter) with `silo`.
absl::Status AddTestGrains(silo::Runtime& silo, TestState* state);

// A RemindGrain.Register request.
ReminderRequest Reminder(std::string name, int64_t due_ms, int64_t period_ms);

}  // namespace granary::testing
