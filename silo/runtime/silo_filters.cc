// The runtime's side of grain call filters (silo/runtime/call_filter.h):
// the chains it keeps, and the outgoing chain a call passes before
// delivery (the incoming chain runs in the activation's turn).
#include "silo/runtime/call_filter.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

void Runtime::FilterOutgoing(CallBase* call, const GrainTypeEntry* type) {
  // A change to the context is the call's own.
  RequestContext& context = call->mutable_request_context();
  FilterRun::Start(
      outgoing_filters_, call->target(),
      type->info->interface->methods[call->method()], call->caller_grain(),
      context.caller != nullptr ? absl::string_view(*context.caller)
                                : absl::string_view(),
      context, &Runtime::OutgoingFiltersDone, this, call, type);
}

void Runtime::OutgoingFiltersDone(void* self, CallBase* call, const void* type,
                                  bool, absl::Status status) {
  if (!status.ok()) {
    call->Fail(std::move(status));
    call->Release();
    return;
  }
  static_cast<Runtime*>(self)->Deliver(
      call, static_cast<const GrainTypeEntry*>(type));
}

void Runtime::AddIncomingFilter(CallFilter filter) {
  incoming_filters_.push_back(std::move(filter));
}

void Runtime::AddOutgoingFilter(CallFilter filter) {
  outgoing_filters_.push_back(std::move(filter));
}

}  // namespace granary::silo
