#include "core/request_context.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/call.h"
#include "core/log.h"
#include "core/status.h"

namespace granary {
namespace {

// Ids for traces and spans: a per-thread splitmix64 stream seeded from the
// system's random source once per thread (a few nanoseconds per id; ids need
// to be unique, not secret).
uint64_t RandomId() {
  thread_local uint64_t state = [] {
    static std::atomic<uint64_t> threads{0};
    std::random_device rd;
    return ((uint64_t{rd()} << 32) ^ rd()) +
           threads.fetch_add(1, std::memory_order_relaxed) *
               0x9e3779b97f4a7c15ULL;
  }();
  uint64_t z;
  do {
    z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
  } while (z == 0);
  return z;
}

bool KeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

constexpr char kHex[] = "0123456789abcdef";

void AppendHex(uint64_t v, int digits, std::string* out) {
  for (int i = digits - 1; i >= 0; --i) {
    out->push_back(kHex[(v >> (4 * i)) & 0xF]);
  }
}

// Big-endian 64-bit stores and loads for the binary trace (no alignment
// needed: memcpy compiles to one move, the swap to one bswap).
static_assert(std::endian::native == std::endian::little ||
              std::endian::native == std::endian::big);

uint64_t ToBigEndian(uint64_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    return __builtin_bswap64(v);
  }
  return v;
}

void StoreBig64(uint64_t v, char* out) {
  v = ToBigEndian(v);
  std::memcpy(out, &v, sizeof(v));
}

uint64_t LoadBig64(const char* in) {
  uint64_t v;
  std::memcpy(&v, in, sizeof(v));
  return ToBigEndian(v);
}

// Lowercase hex only (W3C); false on anything else.
bool ParseHex(absl::string_view text, uint64_t* out) {
  uint64_t v = 0;
  for (char c : text) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

RequestContext& CurrentContext() {
  TurnContext* turn = CurrentTurn();
  return turn != nullptr ? turn->request : internal::ThreadContext();
}

size_t MapBytes(const ContextMap& map) {
  size_t bytes = 0;
  for (const auto& [k, v] : map) bytes += k.size() + v.size();
  return bytes;
}

}  // namespace

absl::Status ValidateContextKey(absl::string_view key) {
  if (key.empty() || key.size() > kMaxContextKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request context key must be 1 to ", kMaxContextKeyBytes,
                     " characters, got ", key.size()));
  }
  if (!std::all_of(key.begin(), key.end(), KeyChar)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request context key ", LogQuote(key),
                     " may hold only a-z, 0-9, '.', '_' and '-'"));
  }
  if (key.size() >= 4 && key.substr(key.size() - 4) == "-bin") {
    return absl::InvalidArgumentError(
        absl::StrCat("request context key ", key, " must not end in -bin"));
  }
  return absl::OkStatus();
}

absl::Status ValidateContextValue(absl::string_view value) {
  if (value.size() > kMaxContextValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request context value is ", value.size(),
                     " bytes, over the limit of ", kMaxContextValueBytes));
  }
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "request context value may hold only printable ASCII");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateContextMap(const ContextMap& map) {
  if (map.size() > kMaxContextEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("request context has ", map.size(),
                     " entries, over the limit of ", kMaxContextEntries));
  }
  for (size_t i = 0; i < map.size(); ++i) {
    if (absl::Status s = ValidateContextKey(map[i].first); !s.ok()) return s;
    if (absl::Status s = ValidateContextValue(map[i].second); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.message(), " (key ", map[i].first, ")"));
    }
    if (i > 0 && map[i - 1].first == map[i].first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request context key ", map[i].first, " is given twice"));
    }
  }
  const size_t bytes = MapBytes(map);
  if (bytes > kMaxContextBytes) {
    return absl::InvalidArgumentError(absl::StrCat("request context is ", bytes,
                                                   " bytes, over the limit of ",
                                                   kMaxContextBytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ContextMap>> MakeContextValues(
    ContextMap entries) {
  if (entries.empty()) return nullptr;
  if (entries.size() > kMaxContextEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("request context has ", entries.size(),
                     " entries, over the limit of ", kMaxContextEntries));
  }
  std::sort(entries.begin(), entries.end());
  GRANARY_RETURN_IF_ERROR(ValidateContextMap(entries));
  return std::make_shared<const ContextMap>(std::move(entries));
}

std::string TraceContext::TraceIdHex() const {
  if (!valid()) return {};
  std::string out;
  out.reserve(32);
  AppendHex(trace_hi, 16, &out);
  AppendHex(trace_lo, 16, &out);
  return out;
}

std::string TraceContext::ToTraceparent() const {
  if (!valid()) return {};
  std::string out;
  out.reserve(55);
  out.append("00-");
  AppendHex(trace_hi, 16, &out);
  AppendHex(trace_lo, 16, &out);
  out.push_back('-');
  AppendHex(span, 16, &out);
  out.push_back('-');
  AppendHex(flags, 2, &out);
  return out;
}

TraceContext TraceContext::NewRoot() {
  TraceContext t;
  t.trace_hi = RandomId();
  t.trace_lo = RandomId();
  t.span = RandomId();
  t.flags = 1;
  return t;
}

TraceContext TraceContext::NewSpan() const {
  TraceContext t = *this;
  t.span = RandomId();
  return t;
}

std::optional<TraceContext> TraceContext::Parse(absl::string_view h) {
  // version "-" trace-id "-" parent-id "-" flags: 2+1+32+1+16+1+2 = 55.
  if (h.size() < 55 || h[2] != '-' || h[35] != '-' || h[52] != '-') {
    return std::nullopt;
  }
  uint64_t version;
  if (!ParseHex(h.substr(0, 2), &version) || version == 0xff) {
    return std::nullopt;
  }
  // Version 00 is exactly 55 characters; a later version may append fields
  // after another '-'.
  if (h.size() > 55 && (version == 0 || h[55] != '-')) return std::nullopt;
  TraceContext t;
  uint64_t flags;
  if (!ParseHex(h.substr(3, 16), &t.trace_hi) ||
      !ParseHex(h.substr(19, 16), &t.trace_lo) ||
      !ParseHex(h.substr(36, 16), &t.span) ||
      !ParseHex(h.substr(53, 2), &flags)) {
    return std::nullopt;
  }
  t.flags = static_cast<uint8_t>(flags);
  if (!t.valid()) return std::nullopt;
  return t;
}

void TraceContext::AppendBinary(std::string* out) const {
  if (!valid()) return;
  char bytes[kTraceBinaryBytes];
  StoreBig64(trace_hi, bytes);
  StoreBig64(trace_lo, bytes + 8);
  StoreBig64(span, bytes + 16);
  bytes[24] = static_cast<char>(flags);
  out->append(bytes, sizeof(bytes));
}

std::string TraceContext::ToBinary() const {
  std::string out;
  AppendBinary(&out);
  return out;
}

std::optional<TraceContext> TraceContext::FromBinary(absl::string_view bytes) {
  if (bytes.size() != kTraceBinaryBytes) return std::nullopt;
  TraceContext t;
  t.trace_hi = LoadBig64(bytes.data());
  t.trace_lo = LoadBig64(bytes.data() + 8);
  t.span = LoadBig64(bytes.data() + 16);
  t.flags = static_cast<uint8_t>(bytes[24]);
  if (!t.valid()) return std::nullopt;
  return t;
}

TraceContext ContinueTrace(absl::string_view header) {
  if (!header.empty()) {
    if (std::optional<TraceContext> t = TraceContext::Parse(header)) {
      return t->NewSpan();
    }
  }
  return TraceContext::NewRoot();
}

TraceContext ContinueWireTrace(absl::string_view binary,
                               absl::string_view traceparent) {
  if (binary.empty()) return ContinueTrace(traceparent);
  if (std::optional<TraceContext> t = TraceContext::FromBinary(binary)) {
    return t->NewSpan();
  }
  return TraceContext::NewRoot();
}

RequestContext RootContext() {
  RequestContext c;
  c.chain_id = NewChainId();
  c.trace = TraceContext::NewRoot();
  return c;
}

absl::Status MergeContext(const ContextMap& entries, RequestContext* base) {
  if (entries.empty()) return absl::OkStatus();
  ContextMap merged = base->values != nullptr ? *base->values : ContextMap{};
  for (const auto& [k, v] : entries) {
    auto it = std::lower_bound(
        merged.begin(), merged.end(), k,
        [](const auto& e, const std::string& key) { return e.first < key; });
    if (it != merged.end() && it->first == k) {
      it->second = v;
    } else {
      merged.insert(it, {k, v});
    }
  }
  GRANARY_RETURN_IF_ERROR(ValidateContextMap(merged));
  base->values = std::make_shared<const ContextMap>(std::move(merged));
  return absl::OkStatus();
}

std::optional<std::string> GetContext(absl::string_view key) {
  const RequestContext& c = CurrentContext();
  if (c.values == nullptr) return std::nullopt;
  auto it = std::lower_bound(
      c.values->begin(), c.values->end(), key,
      [](const auto& e, absl::string_view k) { return e.first < k; });
  if (it == c.values->end() || it->first != key) return std::nullopt;
  return it->second;
}

absl::Status SetContext(absl::string_view key, absl::string_view value) {
  GRANARY_RETURN_IF_ERROR(ValidateContextKey(key));
  GRANARY_RETURN_IF_ERROR(ValidateContextValue(value));
  return MergeContext({{std::string(key), std::string(value)}},
                      &CurrentContext());
}

void RemoveContext(absl::string_view key) {
  RequestContext& c = CurrentContext();
  if (c.values == nullptr) return;
  ContextMap rest;
  rest.reserve(c.values->size());
  for (const auto& e : *c.values) {
    if (e.first != key) rest.push_back(e);
  }
  if (rest.size() == c.values->size()) return;
  c.values = rest.empty() ? nullptr
                          : std::make_shared<const ContextMap>(std::move(rest));
}

ContextMap ContextEntries() {
  const RequestContext& c = CurrentContext();
  return c.values != nullptr ? *c.values : ContextMap{};
}

std::string CurrentTraceId() {
  TurnContext* turn = CurrentTurn();
  return turn != nullptr ? turn->request.trace.TraceIdHex() : std::string();
}

namespace internal {
RequestContext& ThreadContext() {
  thread_local RequestContext context;
  return context;
}
}  // namespace internal

}  // namespace granary
