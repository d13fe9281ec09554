#include "core/log.h"

#include <cstdio>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "core/clock.h"

namespace granary {
namespace internal {

std::atomic<int> g_log_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_log_format{static_cast<int>(LogFormat::kText)};

LogLine::LogLine(LogLevel level, const char* file, int line) : level_(level) {
  (void)file;
  (void)line;
  // A line written in a turn names the trace of the request it serves
  // (core/request_context.h), so one request can be followed across silos.
  if (TurnContext* turn = CurrentTurn();
      turn != nullptr && turn->request.trace.valid()) {
    stream_ << "trace_id=" << turn->request.trace.TraceIdHex() << ' ';
  }
}

LogLine::LogLine(LogLevel level, const char* file, int line,
                 LogEveryState* every)
    : LogLine(level, file, line) {
  const int64_t suppressed = every->TakeSuppressed();
  if (suppressed > 0) stream_ << "suppressed=" << suppressed << ' ';
}

bool LogEveryState::Allow(int64_t now_ns, int64_t period_ns) {
  int64_t last = last_ns_.load(std::memory_order_relaxed);
  // `now_ns - last` cannot overflow: `last` is kNever or an earlier now_ns.
  if ((last == kNever || (now_ns >= last && now_ns - last >= period_ns)) &&
      last_ns_.compare_exchange_strong(last, now_ns,
                                       std::memory_order_relaxed)) {
    return true;
  }
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool LogEveryState::Allow(absl::Duration period) {
  return Allow(MonoNanos(), absl::ToInt64Nanoseconds(period));
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

// The length of the valid UTF-8 sequence at the start of `v` (no overlong
// forms, surrogates or code points past U+10FFFF), or 0 when there is none.
size_t Utf8Length(absl::string_view v) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(v[i]); };
  const unsigned char c = b(0);
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (c < 0x80) {
    return 1;
  } else if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (v.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xbf) return 0;
  }
  return n;
}

// Appends `v` for a text line: printable ASCII and valid UTF-8 as they are,
// control characters and bytes that are not valid UTF-8 escaped, so the line
// stays one line whatever `v` holds.
void AppendTextSafe(absl::string_view v, std::string* out) {
  size_t i = 0;
  while (i < v.size()) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c >= 0x20 && c < 0x7f) {
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (c == '\n') {
      out->append("\\n");
      ++i;
    } else if (c == '\r') {
      out->append("\\r");
      ++i;
    } else if (c == '\t') {
      out->append("\\t");
      ++i;
    } else if (const size_t n = c < 0x80 ? 0 : Utf8Length(v.substr(i)); n > 0) {
      out->append(v.data() + i, n);
      i += n;
    } else {  // another control character, or not valid UTF-8
      absl::StrAppendFormat(out, "\\x%02x", c);
      ++i;
    }
  }
}

// Appends `v` as a JSON string of valid UTF-8, whatever bytes `v` holds: a
// byte that is not valid UTF-8 becomes the text \xNN (escaped: "\\xNN").
void AppendJsonString(absl::string_view v, std::string* out) {
  out->push_back('"');
  size_t i = 0;
  while (i < v.size()) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
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
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(out, "\\u%04x", c);
        } else if (c < 0x80) {
          out->push_back(static_cast<char>(c));
        } else if (const size_t n = Utf8Length(v.substr(i)); n > 0) {
          out->append(v.data() + i, n);
          i += n;
          continue;
        } else {
          absl::StrAppendFormat(out, "\\\\x%02x", c);
        }
    }
    ++i;
  }
  out->push_back('"');
}

bool IsKeyChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || c == '_' || (!first && c >= '0' && c <= '9');
}

// Takes one leading `key=value` field off `rest`: key [a-z_][a-z0-9_]*, value
// either bare (up to the next space, non-empty) or quoted as LogQuote writes
// it. False (and `rest` untouched) when `rest` does not start with one.
bool TakeField(absl::string_view* rest, std::string* key, std::string* value) {
  absl::string_view r = *rest;
  size_t i = 0;
  while (i < r.size() && IsKeyChar(r[i], i == 0)) ++i;
  if (i == 0 || i >= r.size() || r[i] != '=') return false;
  *key = std::string(r.substr(0, i));
  ++i;
  value->clear();
  if (i < r.size() && r[i] == '"') {
    ++i;
    while (i < r.size() && r[i] != '"') {
      if (r[i] == '\\' && i + 1 < r.size()) {
        const char e = r[i + 1];
        if (e == 'n') {
          value->push_back('\n');
        } else if (e == 't') {
          value->push_back('\t');
        } else if (e == 'x' && i + 3 < r.size() &&
                   absl::ascii_isxdigit(static_cast<unsigned char>(r[i + 2])) &&
                   absl::ascii_isxdigit(static_cast<unsigned char>(r[i + 3]))) {
          int v = 0;
          for (int k = 2; k <= 3; ++k) {
            const char h = r[i + k];
            v = v * 16 + (h >= 'a'   ? h - 'a' + 10
                          : h >= 'A' ? h - 'A' + 10
                                     : h - '0');
          }
          if (v < 0x80) {
            value->push_back(static_cast<char>(v));
          } else {
            // Not ASCII: keep the escape, so the JSON stays valid UTF-8.
            value->append(r.data() + i, 4);
          }
          i += 2;
        } else {
          value->push_back(e);
        }
        i += 2;
      } else {
        value->push_back(r[i++]);
      }
    }
    if (i >= r.size()) return false;  // unterminated
    ++i;
  } else {
    const size_t end = r.find(' ', i);
    const size_t stop = end == absl::string_view::npos ? r.size() : end;
    if (stop == i) return false;
    *value = std::string(r.substr(i, stop - i));
    i = stop;
  }
  if (i < r.size() && r[i] != ' ') return false;
  *rest = i < r.size() ? r.substr(i + 1) : absl::string_view();
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
    std::string out =
        absl::StrCat(timestamp, " ", absl::string_view(&kLetters[l], 1), " ");
    AppendTextSafe(message, &out);
    return out;
  }
  std::string out = "{\"ts\":";
  AppendJsonString(timestamp, &out);
  out.append(",\"level\":");
  AppendJsonString(kNames[l], &out);
  absl::string_view rest = message;
  std::string key, value;
  absl::flat_hash_set<std::string> seen;
  while (!rest.empty()) {
    absl::string_view before = rest;
    if (!TakeField(&rest, &key, &value) || key == "ts" || key == "level" ||
        key == "msg" || !seen.insert(key).second) {
      rest = before;
      break;
    }
    out.push_back(',');
    AppendJsonString(key, &out);
    out.push_back(':');
    AppendJsonString(value, &out);
  }
  out.append(",\"msg\":");
  AppendJsonString(rest, &out);
  out.push_back('}');
  return out;
}

std::string LogQuote(absl::string_view v) {
  bool plain = !v.empty();
  for (unsigned char c : v) {
    if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '=') {
      plain = false;
      break;
    }
  }
  if (plain) return std::string(v);
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (c < 0x20 || c >= 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
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
  if (t == "debug")
    *level = LogLevel::kDebug;
  else if (t == "info")
    *level = LogLevel::kInfo;
  else if (t == "warning" || t == "warn")
    *level = LogLevel::kWarning;
  else if (t == "error")
    *level = LogLevel::kError;
  else
    return false;
  return true;
}

}  // namespace granary
