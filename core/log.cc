#include "core/log.h"

#include <cstdio>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace granary {
namespace internal {

std::atomic<int> g_log_level{static_cast<int>(LogLevel::kInfo)};

LogLine::LogLine(LogLevel level, const char* file, int line) : level_(level) {
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  stream_ << absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(),
                              absl::UTCTimeZone())
          << ' ' << kLetters[static_cast<int>(level)] << ' ';
  (void)file;
  (void)line;
}

LogLine::~LogLine() {
  stream_ << '\n';
  std::string s = stream_.str();
  std::fwrite(s.data(), 1, s.size(), stderr);  // one write per line
}

}  // namespace internal

void SetLogLevel(LogLevel level) {
  internal::g_log_level.store(static_cast<int>(level),
                              std::memory_order_relaxed);
}

LogLevel GetLogLevel() {
  return static_cast<LogLevel>(
      internal::g_log_level.load(std::memory_order_relaxed));
}

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  std::string t = absl::AsciiStrToLower(text);
  if (t == "debug") *level = LogLevel::kDebug;
  else if (t == "info") *level = LogLevel::kInfo;
  else if (t == "warning" || t == "warn") *level = LogLevel::kWarning;
  else if (t == "error") *level = LogLevel::kError;
  else return false;
  return true;
}

}  // namespace granary
