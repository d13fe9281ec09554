// File: core/log.h
// -----------------------------------------------------------------------------
// Leveled, line-oriented logging to stderr, one event per line. A message
// starts with the `key=value` fields it is about (grain=, silo=, ...), then
// free text:
//
//   GRANARY_LOG(kWarning) << "grain=" << id << " turn_ms=" << ms << " slow turn";
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
#pragma once

#include <atomic>
#include <sstream>
#include <string>

#include "absl/strings/string_view.h"

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
