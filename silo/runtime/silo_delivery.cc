// Silo: the parts of delivery that grain options and call filters add to
// silo.cc's: outgoing call filters (silo/runtime/call_filter.h) and the
// pools of stateless worker grains.
#include "absl/strings/str_cat.h"
#include "silo/runtime/silo.h"

namespace granary::silo {

void Silo::FilterOutgoing(CallBase* call, const GrainTypeEntry* type) {
  // A change to the context is the call's own.
  RequestContext& context = call->mutable_request_context();
  FilterRun::Start(
      outgoing_filters_, call->target(),
      type->info->interface->methods[call->method()], call->caller_grain(),
      context.caller != nullptr ? absl::string_view(*context.caller)
                                : absl::string_view(),
      context, &Silo::OutgoingFiltersDone, this, call, type);
}

void Silo::OutgoingFiltersDone(void* self, CallBase* call, const void* type,
                               bool, absl::Status status) {
  if (!status.ok()) {
    call->Fail(std::move(status));
    call->Release();
    return;
  }
  static_cast<Silo*>(self)->Deliver(call,
                                    static_cast<const GrainTypeEntry*>(type));
}

void Silo::AddIncomingFilter(CallFilter filter) {
  incoming_filters_.push_back(std::move(filter));
}

void Silo::AddOutgoingFilter(CallFilter filter) {
  outgoing_filters_.push_back(std::move(filter));
}

void Silo::DeliverToWorker(CallBase* call, const GrainTypeEntry* type) {
  const uint32_t max = type->info->interface->max_local_workers;
  absl::Status refused;
  const bool delivered = catalog_.PostToWorker(
      call->target(), call,
      max != 0 ? max : static_cast<size_t>(scheduler_.workers()),
      [&]() -> Activation* {
        if (stopping()) return nullptr;
        refused = MayActivate();
        if (!refused.ok()) return nullptr;
        return new Activation(
            this, type, call->target(),
            next_activation_id_.fetch_add(1, std::memory_order_relaxed));
      });
  if (delivered) return;
  call->Fail(!refused.ok()
                 ? std::move(refused)
                 : absl::UnavailableError(absl::StrCat(
                       "silo ", options_.name, " is shutting down; ",
                       call->target().ToString(), " cannot be activated")));
  call->Release();
}

}  // namespace granary::silo
