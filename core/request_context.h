// File: core/request_context.h
// -----------------------------------------------------------------------------
// Request context: a small string -> string map and a W3C trace that follow a
// call along every call made on its behalf, locally and across silos
// (Orleans' RequestContext, plus `traceparent`).
//
// A caller sets entries; grain code reads and changes them; every call a turn
// makes carries the turn's context as it is at that moment:
//
//   // client code (C++ SDK): per call, or for the thread
//   granary::CallOptions options;
//   options.context = {{"tenant", "acme"}};
//   co_await counter.Add(req, options);
//   // any gRPC client: metadata "granary-ctx-tenant: acme", "traceparent:
//   00-..."
//   // the CLI: granary call --context tenant=acme ...
//
//   // grain code
//   std::optional<std::string> tenant = granary::GetContext("tenant");
//   absl::Status s = granary::SetContext("stage", "billing");  // downstream
//   sees it GRANARY_LOG(kInfo) << "grain=" << id << " billed";  // line carries
//   trace_id=
//
// Bounds (remote input): a key is 1 to 64 characters of [a-z0-9._-] and does
// not end in "-bin" (so it can travel as gRPC metadata `granary-ctx-<key>`);
// a value is up to 1024 printable ASCII characters; at most 32 entries and
// 4096 bytes of keys and values together. Past a bound a call is refused with
// INVALID_ARGUMENT and SetContext leaves the context as it was.
//
// Tracing: every call belongs to a trace (`TraceContext`: trace id, span id,
// flags). A caller's `traceparent` is honoured; where none comes (or one
// that does not parse, which W3C says to restart), a new trace begins. Each
// silo that accepts a call from the network gives it a new span id under the
// same trace id, and passes the trace id and its span id on with every call
// it sends on (the gateway protocol's binary `trace` field), so one request
// can be followed across silos: log lines written in a turn start with
// `trace_id=`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/cancel.h"

namespace granary {

inline constexpr size_t kMaxContextKeyBytes = 64;
inline constexpr size_t kMaxContextValueBytes = 1024;
inline constexpr size_t kMaxContextEntries = 32;
inline constexpr size_t kMaxContextBytes = 4096;

// Entries sorted by key, keys unique. Immutable once shared: a change makes
// a new map (copy on write), so copying a context is one reference count.
using ContextMap = std::vector<std::pair<std::string, std::string>>;

// INVALID_ARGUMENT naming what is wrong, else OK.
absl::Status ValidateContextKey(absl::string_view key);
absl::Status ValidateContextValue(absl::string_view value);
// Every entry valid, keys unique, and within the count and byte bounds.
absl::Status ValidateContextMap(const ContextMap& map);

// `entries` in any order, sorted and validated: what a silo accepts from the
// network. Null for no entries.
absl::StatusOr<std::shared_ptr<const ContextMap>> MakeContextValues(
    ContextMap entries);

// The size of a trace in binary (TraceContext::AppendBinary).
inline constexpr size_t kTraceBinaryBytes = 25;

// A W3C trace context (https://www.w3.org/TR/trace-context/, version 00).
struct TraceContext {
  uint64_t trace_hi = 0;  // trace id, 128 bits; all zero: no trace
  uint64_t trace_lo = 0;
  uint64_t span = 0;  // this hop's span id (a traceparent's parent-id)
  uint8_t flags = 0;  // trace-flags (bit 0: sampled)

  bool valid() const { return (trace_hi | trace_lo) != 0 && span != 0; }
  // 32 lowercase hex digits; empty when !valid().
  std::string TraceIdHex() const;
  // "00-<trace id>-<span id>-<flags>"; empty when !valid().
  std::string ToTraceparent() const;
  // A new trace: random trace and span ids, sampled.
  static TraceContext NewRoot();
  // The same trace with a new span id: how a silo continues a trace it
  // received (the received span id is the parent of this one).
  TraceContext NewSpan() const;
  // Parses a traceparent header: version 00 (or a later version's first four
  // fields), lowercase hex, trace and parent ids not all zero. nullopt when it
  // does not parse.
  static std::optional<TraceContext> Parse(absl::string_view header);

  // The binary form the gateway protocol carries (granary.v1.Request.trace):
  // kTraceBinaryBytes bytes, a traceparent's fields without its version and
  // without hex: trace_hi, trace_lo and span big-endian, then flags.
  //   std::string wire;
  //   trace.AppendBinary(&wire);   // 25 bytes appended
  //   TraceContext::FromBinary(wire)->span == trace.span
  // Appends nothing when !valid().
  void AppendBinary(std::string* out) const;
  std::string ToBinary() const;
  // Reads the binary form: nullopt unless `bytes` is exactly
  // kTraceBinaryBytes long with a trace id and a span id not all zero. Any
  // flags are kept (the binary form has no version to tell them apart).
  static std::optional<TraceContext> FromBinary(absl::string_view bytes);
};

// A traceparent's trace continued with a new span, or a new root when
// `header` is empty or does not parse (W3C: restart the trace).
TraceContext ContinueTrace(absl::string_view header);

// The trace of a gateway protocol request continued with a new span: from
// `binary` (Request.trace) when it is not empty, else from `traceparent`
// (Request.traceparent, the text form). A new root when both are empty or
// the one read is malformed (W3C: restart the trace).
TraceContext ContinueWireTrace(absl::string_view binary,
                               absl::string_view traceparent);

// The request a turn is serving: calls made during the turn inherit it.
struct RequestContext {
  // The call chain, which lets A -> B -> A re-enter A (call-chain
  // reentrancy).
  uint64_t chain_id = 0;
  // The identity the client that started the chain was accepted with (its
  // bearer token's name or its certificate's subject); null: anonymous,
  // or the chain started in the runtime (a timer, a reminder).
  std::shared_ptr<const std::string> caller;
  // The context entries; null: none.
  std::shared_ptr<const ContextMap> values;
  TraceContext trace;
  // The cancellation scope of the request a turn serves (core/cancel.h):
  // the call itself; calls the turn makes are registered under it. Null:
  // not cancellable (one-way calls, timers, reminders, outside grain code).
  CancelRef cancel;
};

// A context that starts a chain and a trace (a call from outside grain code,
// a timer, a reminder).
RequestContext RootContext();

// Overlays `entries` (validated) on `base`'s values. INVALID_ARGUMENT leaves
// `base` unchanged.
absl::Status MergeContext(const ContextMap& entries, RequestContext* base);

// --- the current request's context -----------------------------------------
// In grain code: the running turn's. Outside grain code: the calling thread's
// own, which calls started on this thread outside a turn carry (a client
// program's ambient context).

// The value of `key`, if set.
std::optional<std::string> GetContext(absl::string_view key);
// Sets `key` (INVALID_ARGUMENT for a bad key or value, or past the bounds;
// the context is then unchanged).
absl::Status SetContext(absl::string_view key, absl::string_view value);
// Removes `key` (nothing when it is not set).
void RemoveContext(absl::string_view key);
// Every entry (a copy).
ContextMap ContextEntries();
// The current trace id (32 hex digits), empty when there is none.
std::string CurrentTraceId();

namespace internal {
// The context of the calling thread outside any turn.
RequestContext& ThreadContext();
}  // namespace internal

}  // namespace granary
