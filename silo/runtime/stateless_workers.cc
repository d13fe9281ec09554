// Stateless workers (DESIGN.md): a grain type marked stateless_worker has
// no single activation and no directory entry; each silo keeps a pool of
// up to max_local_workers activations of each key (default: one per
// worker thread) and hands a call to an idle one, activating another while
// the pool has room (Catalog::PostToWorker).
#include "absl/strings/str_cat.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

void Runtime::DeliverToWorker(CallBase* call, const GrainTypeEntry* type) {
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
