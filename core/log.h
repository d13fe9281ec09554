// File: core/log.h
// -----------------------------------------------------------------------------
// Leveled, line-oriented logging to stderr, one event per line. A message
// starts with the `key=value` fields it is about (grain=, silo=, ...), then
// free text:
//
//   GRANARY_LOG(kWarning) << "grain=" << id << " turn_ms=" << ms << " slow
//   turn";
//   -> 2026-11-29T21:00:00.123456Z W grain=... turn_ms=12 slow turn
//
// With SetLogFormat(LogFormat::kJson) the same event is one JSON object:
//   {"ts":"2026-11-29T21:00:00.123456Z","level":"warning","grain":"...",
//    "turn_ms":"12","msg":"slow turn"}
// (the leading key=value tokens become fields, quoted values unescaped; the
// rest is "msg").
//
// SetLogLevel() filters; the default is kInfo. Lines below the level cost one
// relaxed atomic load.
//
// Remote input cannot forge lines. Whatever bytes a message holds (a grain
// key or method name streamed in raw, say), one event is one line:
//  - text: control characters (below 0x20 and 0x7f) are written as \n, \r,
//    \t or \xNN, and so is every byte that is not part of valid UTF-8; valid
//    UTF-8 and everything else stays as is (a backslash included, so a raw
//    "\n" in the text reads like an escaped newline: still one line).
//  - JSON: every string is valid JSON of valid UTF-8: control characters as
//    \n, \r, \t or \u00NN, each byte that is not valid UTF-8 as the text
//    \xNN (in JSON "\\xNN", as a quoted field value's escapes come out).
// A value a client chose still goes through LogQuote(), or it could pose as
// further fields (`grain=a method=Forged`); the escaping above only keeps it
// from splitting or corrupting the line.
//
// A warning that remote peers can trigger at will is rate-limited per call
// site, so a flood cannot fill the disk or drown other lines:
//
//   GRANARY_LOG_EVERY(kWarning, absl::Seconds(1))
//       << "peer=" << LogQuote(peer) << " refused a stream";
//   -> ... W suppressed=41 peer=10.0.0.7:5123 refused a stream
//
// A line goes out when at least `period` has passed (monotonic time) since the
// last one of that call site went out; the first one always does. The others
// are dropped without evaluating their stream operands (as below the level)
// and counted; the next line that goes out starts with `suppressed=N` (N lines
// dropped since the previous one, left out when 0), a field in JSON format.
// Each call site keeps its state in a static object: lock-free, two relaxed
// atomics and one clock read per call that passes the level.
#pragma once

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace granary {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug", "info", "warning" or "error".
bool ParseLogLevel(absl::string_view text, LogLevel* level);

// A field value as it goes into a log line: as is when it is plain
// printable ASCII without spaces, quotes, backslashes or '='; otherwise in
// double quotes with \" \\ \n \t and \xNN escapes (so a grain key chosen
// by a client can neither split a line nor forge a field).
std::string LogQuote(absl::string_view value);

enum class LogFormat : int { kText = 0, kJson = 1 };
void SetLogFormat(LogFormat format);
// Parses "text" or "json".
bool ParseLogFormat(absl::string_view text, LogFormat* format);
// The line `message` at `level` becomes in `format` (without the newline).
std::string FormatLogLine(LogFormat format, LogLevel level,
                          absl::string_view timestamp,
                          absl::string_view message);

namespace internal {

extern std::atomic<int> g_log_level;

class LogEveryState;

class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line);
  // A line of GRANARY_LOG_EVERY: starts with `suppressed=N ` when `every`
  // dropped N > 0 lines since its last one went out.
  LogLine(LogLevel level, const char* file, int line, LogEveryState* every);
  ~LogLine();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// The state of one GRANARY_LOG_EVERY call site. Thread-safe and lock-free;
// constant-initialized, so a function-local static needs no guard.
class LogEveryState {
 public:
  constexpr LogEveryState() = default;
  LogEveryState(const LogEveryState&) = delete;
  LogEveryState& operator=(const LogEveryState&) = delete;

  // True when a line at monotonic time `now_ns` may go out: none went out
  // yet, or at least `period_ns` passed since the last one did (which this
  // one becomes). False counts the line as suppressed. When threads race for
  // one slot, one wins and the others count as suppressed.
  bool Allow(int64_t now_ns, int64_t period_ns);
  // Allow() at MonoNanos() (core/clock.h).
  bool Allow(absl::Duration period);
  // The lines suppressed since the last call, reset to 0.
  int64_t TakeSuppressed() {
    return suppressed_.exchange(0, std::memory_order_relaxed);
  }

 private:
  static constexpr int64_t kNever = INT64_MIN;
  std::atomic<int64_t> last_ns_{kNever};  // when the last line went out
  std::atomic<int64_t> suppressed_{0};
};

}  // namespace internal
}  // namespace granary

#define GRANARY_LOG(level)                                              \
  if (static_cast<int>(::granary::LogLevel::level) <                    \
      ::granary::internal::g_log_level.load(std::memory_order_relaxed)) \
    ;                                                                   \
  else                                                                  \
    ::granary::internal::LogLine(::granary::LogLevel::level, __FILE__,  \
                                 __LINE__)                              \
        .stream()

// Like GRANARY_LOG, but at most one line per `period` (an absl::Duration) from
// this call site; see the top of this file.
#define GRANARY_LOG_EVERY(level, period)                                      \
  if (static ::granary::internal::LogEveryState granary_log_every_state_;     \
      static_cast<int>(::granary::LogLevel::level) <                          \
          ::granary::internal::g_log_level.load(std::memory_order_relaxed) || \
      !granary_log_every_state_.Allow(period))                                \
    ;                                                                         \
  else                                                                        \
    ::granary::internal::LogLine(::granary::LogLevel::level, __FILE__,        \
                                 __LINE__, &granary_log_every_state_)         \
        .stream()
