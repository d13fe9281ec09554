#include "core/log.h"

#include <cstdio>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace granary {
namespace internal {

std::atomic<int> g_log_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_log_format{static_cast<int>(LogFormat::kText)};

LogLine::LogLine(LogLevel level, const char* file, int line) : level_(level) {
  (void)file;
  (void)line;
}

LogLine::~LogLine() {
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(),
                                          absl::UTCTimeZone());
  std::string s = FormatLogLine(
      static_cast<LogFormat>(g_log_format.load(std::memory_order_relaxed)),
      level_, ts, stream_.str());
  s.push_back('\n');
  std::fwrite(s.data(), 1, s.size(), stderr);  // one write per line
}

}  // namespace internal

namespace {

void AppendJsonString(absl::string_view v, std::string* out) {
  out->push_back('"');
  for (unsigned char c : v) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// `key=value` with key [a-z_][a-z0-9_]* and a non-empty value.
bool SplitField(absl::string_view token, absl::string_view* key,
                absl::string_view* value) {
  const size_t eq = token.find('=');
  if (eq == absl::string_view::npos || eq == 0 || eq + 1 == token.size()) {
    return false;
  }
  for (size_t i = 0; i < eq; ++i) {
    const char c = token[i];
    const bool ok = (c >= 'a' && c <= 'z') || c == '_' ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  *key = token.substr(0, eq);
  *value = token.substr(eq + 1);
  return true;
}

}  // namespace

std::string FormatLogLine(LogFormat format, LogLevel level,
                          absl::string_view timestamp,
                          absl::string_view message) {
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  static constexpr const char* kNames[] = {"debug", "info", "warning", "error"};
  const int l = static_cast<int>(level);
  if (format == LogFormat::kText) {
    return absl::StrCat(timestamp, " ", absl::string_view(&kLetters[l], 1),
                        " ", message);
  }
  std::string out = "{\"ts\":";
  AppendJsonString(timestamp, &out);
  out.append(",\"level\":");
  AppendJsonString(kNames[l], &out);
  absl::string_view rest = message;
  while (!rest.empty()) {
    const size_t space = rest.find(' ');
    absl::string_view token = rest.substr(0, space);
    absl::string_view key, value;
    if (!SplitField(token, &key, &value) || key == "ts" || key == "level" ||
        key == "msg") {
      break;
    }
    out.push_back(',');
    AppendJsonString(key, &out);
    out.push_back(':');
    AppendJsonString(value, &out);
    rest = space == absl::string_view::npos ? absl::string_view()
                                            : rest.substr(space + 1);
  }
  out.append(",\"msg\":");
  AppendJsonString(rest, &out);
  out.push_back('}');
  return out;
}

void SetLogFormat(LogFormat format) {
  internal::g_log_format.store(static_cast<int>(format),
                               std::memory_order_relaxed);
}

bool ParseLogFormat(absl::string_view text, LogFormat* format) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "text") {
    *format = LogFormat::kText;
  } else if (t == "json") {
    *format = LogFormat::kJson;
  } else {
    return false;
  }
  return true;
}

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
