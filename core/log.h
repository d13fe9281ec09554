// File: core/log.h
// -----------------------------------------------------------------------------
// Leveled, line-oriented logging to stderr, one event per line:
//
//   GRANARY_LOG(kWarning) << "turn took " << ms << "ms grain=" << id;
//   -> 2026-11-29T21:00:00.123456Z W grain=... turn took 12ms
//
// SetLogLevel() filters; the default is kInfo. Lines below the level cost one
// relaxed atomic load.
#pragma once

#include <atomic>
#include <sstream>

#include "absl/strings/string_view.h"

namespace granary {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug", "info", "warning" or "error".
bool ParseLogLevel(absl::string_view text, LogLevel* level);

namespace internal {

extern std::atomic<int> g_log_level;

class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line);
  ~LogLine();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace internal
}  // namespace granary

#define GRANARY_LOG(level)                                                  \
  if (static_cast<int>(::granary::LogLevel::level) <                        \
      ::granary::internal::g_log_level.load(std::memory_order_relaxed))     \
    ;                                                                       \
  else                                                                      \
    ::granary::internal::LogLine(::granary::LogLevel::level, __FILE__,      \
                                 __LINE__)                                  \
        .stream()
