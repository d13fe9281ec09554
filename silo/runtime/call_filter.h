// File: silo/runtime/call_filter.h
// -----------------------------------------------------------------------------
// Grain call filters: coroutines a silo runs around grain calls, for
// authorization, auditing and tracing (Orleans' incoming and outgoing grain
// call filters).
//
//   silo.AddIncomingFilter([](CallFilterContext& call) -> Task<absl::Status> {
//     if (call.method.name == "Withdraw" && call.caller_identity != "teller") {
//       co_return absl::PermissionDeniedError("tellers only");
//     }
//     co_return call.Set("audited", "yes");  // OK: the call goes on, and
//                                            // sees the context entry
//   });
//
// A filter sees the target grain, its type and method, the caller (the
// calling grain, when a grain made the call; the identity the client was
// accepted with, from its token or TLS certificate) and the request context
// (core/request_context.h), which it may change. It returns OK to pass the
// call on, or a status that ends the call with it. Filters run in the order
// added; the first non-OK status ends the call and later filters do not run.
// A filter that throws ends that call with INTERNAL (the silo and other
// calls are unaffected).
//
// - Incoming filters run on the target's silo as the first part of the
//   request's turn, for every grain method call, whether it came from grain
//   code, a hosting process, the C++ SDK or a standard gRPC client, from this
//   silo or another: grain code's rules apply (GetContext/SetContext work,
//   an await suspends the turn). Context changes are what the grain method,
//   and every call it makes, sees.
// - Outgoing filters run on the caller's silo when grain code (a request,
//   timer or lifecycle turn) calls a grain, before the call is routed; a
//   change to the context is carried by that call only.
// Reminder ticks and timer ticks are not calls and pass no filter. A call's
// deadline counts the time its filters take.
//
// A filter's own grain calls are grain calls too: an outgoing filter that
// calls a grain every time it runs calls itself without end. Guard such
// calls (by target type, or with a context entry the filter sets).
//
// Threading: filters are added before Silo::Start and never change after;
// one filter object may run on many workers at once.
#pragma once

#include <coroutine>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/call.h"
#include "core/grain_id.h"
#include "core/grain_interface.h"
#include "core/status.h"
#include "core/task.h"

namespace granary::silo {

struct CallFilterContext {
  const GrainId& target;     // target.type() is the grain type
  const MethodInfo& method;  // method.name ("Add"), method.full_name
  // The grain that made the call; null when a client, a hosting process or
  // the runtime did.
  const GrainId* caller_grain;
  // The identity of the client whose request this call serves, as its
  // gateway accepted it (bearer token name, certificate subject); empty
  // for anonymous clients and calls that started in a silo.
  absl::string_view caller_identity;
  // The request context; changes are seen downstream (see above).
  RequestContext& context;

  // Sets a context entry (INVALID_ARGUMENT past the bounds of
  // core/request_context.h, changing nothing).
  absl::Status Set(absl::string_view key, absl::string_view value) {
    GRANARY_RETURN_IF_ERROR(ValidateContextKey(key));
    return MergeContext({{std::string(key), std::string(value)}}, &context);
  }
};

using CallFilter = std::function<Task<absl::Status>(CallFilterContext&)>;

// `task`'s coroutine, not yet started, destroying its own frame when it
// finishes (the filter runners' frames: nothing awaits them).
inline std::coroutine_handle<> SelfDestroying(Task<void> task) {
  auto h = task.Release();
  h.promise().set_done(
      [](void* frame) { std::coroutine_handle<>::from_address(frame).destroy(); },
      h.address());
  return h;
}

// The status that ends a call whose filter #`index` threw `thrown`:
// INTERNAL. The runners (Activation::FilterThenInvoke, Silo::FilterOutgoing)
// loop over the filters in their own coroutine frame, one co_await each:
//
//   for (size_t i = 0; i < filters.size() && status.ok(); ++i) {
//     try { status = co_await filters[i](call); }
//     catch (...) { status = FilterThrew(i, call, std::current_exception()); }
//   }
absl::Status FilterThrew(size_t index, const CallFilterContext& call,
                         std::exception_ptr thrown);

}  // namespace granary::silo
