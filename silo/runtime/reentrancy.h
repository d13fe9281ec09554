// File: silo/runtime/reentrancy.h
// -----------------------------------------------------------------------------
// Reentrancy (DESIGN.md): which message may start a turn of an activation
// while others are suspended in it. A grain runs one request at a time,
// except that while requests are suspended (awaiting a call), another may
// run when
//   - the grain type is reentrant (then timer ticks interleave too);
//   - its method is always_interleave;
//   - it belongs to the call chain of a suspended request (A -> B -> A);
//   - it and every running request are read_only.
// Replies, deadlines and resumptions always run; a control message (the
// deactivation) waits until nothing runs; reminders and timer ticks wait
// like a request of no chain. Defined inline for activation.cc's turn loop,
// its only user.
#pragma once

#include "silo/runtime/activation.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

inline bool Activation::Eligible(Message* m) const {
  if (m->kind == MessageKind::kControl) return running_.empty();
  if (state_ != State::kActive) return false;
  if (running_.empty()) return true;
  const InterfaceInfo& iface = *type_->info->interface;
  if (m->kind == MessageKind::kTimer) return iface.reentrant;
  if (iface.reentrant) return true;
  auto* call = static_cast<CallBase*>(m);
  if (call->method() == kReminderMethod) return false;  // like a timer tick
  const MethodInfo& method = iface.methods[call->method()];
  if (method.always_interleave) return true;
  const uint64_t chain = call->request_context().chain_id;
  bool all_read_only = true;
  for (const Running& r : running_) {
    if (r.chain_id == chain) return true;
    all_read_only = all_read_only && r.read_only;
  }
  return method.read_only && all_read_only;
}

}  // namespace granary::silo
