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
// Threading: filters are added before Runtime::Start and never change after;
// one filter object may run on many workers at once.
#pragma once

#include <coroutine>
#include <functional>
#include <memory>
#include <optional>
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

// One call's way through a filter chain: how the silo runs incoming filters
// (Activation) and outgoing ones (Silo) alike. Each filter's coroutine is
// started where the one before it finished (in its done callback), so a
// chain costs no coroutine frame beyond the filters' own. A filter that
// suspends is resumed as a turn of the activation it runs in, like any
// grain code; the chain goes on from there.
//
// Runs are reused: each thread keeps one spare.
class FilterRun {
 public:
  // Called once, when the chain ends: `status` is OK when every filter
  // passed the call, else the first non-OK status (INTERNAL for a filter
  // that threw). `suspended`: a filter suspended on the way, so the chain
  // ended in a later turn than it started in.
  using Finish = void (*)(void* owner, CallBase* call, const void* extra,
                          bool suspended, absl::Status status);

  // Runs `filters` on the call the next five arguments describe (the
  // fields of its CallFilterContext, passed one by one: the run builds the
  // context the filters see in place). Returns null when the chain ended
  // before Start returned (`finish` has run), or else the run, parked in a
  // suspended filter: it goes on by itself when that filter resumes, and
  // until then Abandon may end it.
  static FilterRun* Start(const std::vector<CallFilter>& filters,
                          const GrainId& target, const MethodInfo& method,
                          const GrainId* caller_grain,
                          absl::string_view caller_identity,
                          RequestContext& context, Finish finish, void* owner,
                          CallBase* call, const void* extra);

  // Destroys the suspended filter and the run; `finish` never runs (the
  // activation is going away and fails the call itself).
  void Abandon();

  FilterRun(const FilterRun&) = delete;
  FilterRun& operator=(const FilterRun&) = delete;

 private:
  FilterRun() = default;
  ~FilterRun() = default;
  friend struct FilterRunDeleter;

  // Runs filters until one suspends (false) or the chain ends (true: the
  // run is given back and `finish_` has run).
  bool Drive();
  // Reads the finished `frame`'s status into status_ and destroys it.
  void TakeStatus(Task<absl::Status>::Handle frame);
  static void OnFilterDone(void* run);
  void Recycle();

  const std::vector<CallFilter>* filters_ = nullptr;
  std::optional<CallFilterContext> context_;
  Finish finish_ = nullptr;
  void* owner_ = nullptr;
  CallBase* call_ = nullptr;
  const void* extra_ = nullptr;
  size_t next_ = 0;  // the next filter to start
  absl::Status status_;
  // The suspended filter's frame.
  Task<absl::Status>::Handle frame_;
  bool suspended_ = false;
};

}  // namespace granary::silo
