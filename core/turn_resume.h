// File: core/turn_resume.h
// -----------------------------------------------------------------------------
// Private to core's awaiters (cancel.cc, stream.cc): how a coroutine that
// suspends in grain code is resumed as a turn of its own activation.
#pragma once

#include <coroutine>

#include "core/call.h"

namespace granary::internal {

// When the calling code runs as a turn of an activation: a message that
// resumes `h` as a turn of it, with the turn's request context, and that
// activation in `*sink`. Otherwise null (`*sink` unchanged): the caller
// resumes `h` itself.
inline ResumeMessage* NewTurnResume(std::coroutine_handle<> h,
                                    MessageSink** sink) {
  TurnContext* turn = CurrentTurn();
  if (turn == nullptr || turn->activation == nullptr) return nullptr;
  auto* message = new ResumeMessage();
  message->handle = h;
  message->request = turn->request;
  *sink = turn->activation;
  return message;
}

}  // namespace granary::internal
