// File: core/callback_task.h
// -----------------------------------------------------------------------------
// A Task over an operation that reports its outcome through a callback (a
// transport's completion, a store's writer thread), built on Completion
// (core/completion.h): the awaiting coroutine resumes on whichever thread
// calls back, or goes on at once when the callback ran before it could
// suspend.
//
//   Task<absl::StatusOr<Reply>> Ask(Transport* t, Request r) {
//     co_return co_await FromCallback<absl::StatusOr<Reply>>(
//         [&](std::function<void(absl::StatusOr<Reply>)> done) {
//           t->Send(r, std::move(done));          // done runs exactly once
//         });
//   }
#pragma once

#include <functional>
#include <utility>

#include "core/completion.h"
#include "core/task.h"

namespace granary {

// The value `start(done)` reports through `done` (exactly once).
template <typename T>
Task<T> FromCallback(std::function<void(std::function<void(T)>)> start) {
  Completion<T> done;
  start([&done](T value) { done.Complete(std::move(value)); });
  co_return co_await done;
}

}  // namespace granary
