// File: silo/runtime/grain_timer.h
// -----------------------------------------------------------------------------
// A grain timer. One object per registered timer, in exactly one place at a
// time: the silo's timer queue (waiting for its due time), the activation's
// mailbox (a tick to run), or running as a turn. Firing posts it to the
// activation that registered it, found by id and activation id, so a timer
// never reaches a later activation of the same grain.
//
// Ownership: the activation while it is registered; a timer whose activation
// is gone deletes itself when it fires (OnTimer), or is deleted when drained.
#pragma once

#include <functional>

#include "core/call.h"
#include "core/task.h"
#include "core/timer_queue.h"
#include "silo/runtime/grain.h"

namespace granary::silo {

class Runtime;
class Activation;

struct GrainTimer final : Message, TimerEntry {
  GrainTimer() : Message(MessageKind::kTimer) {}
  void OnTimer() override;

  Runtime* silo = nullptr;
  Activation* owner = nullptr;  // valid while delivered to its activation
  GrainId grain;
  uint64_t activation_id = 0;
  TimerId id = 0;
  std::function<Task<void>()> tick;
  absl::Duration period;
  // Worker-only: set when cancelled while the tick is queued or running.
  bool cancelled = false;
  void* frame = nullptr;  // the running tick's coroutine frame
};

}  // namespace granary::silo
