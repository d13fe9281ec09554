// File: core/callback_task.h
// -----------------------------------------------------------------------------
// An awaitable over an operation that reports its outcome through a
// callback (a gRPC completion, a store's writer thread): the coroutine that
// awaits it resumes on whichever thread calls back, or goes on at once when
// the callback ran before the coroutine could suspend.
//
//   Task<absl::StatusOr<Reply>> Ask(Stub* stub, Request r) {
//     co_return co_await FromCallback<absl::StatusOr<Reply>>(
//         [&](std::function<void(absl::StatusOr<Reply>)> done) {
//           StartTheCall(stub, r, std::move(done));   // done runs once
//         });
//   }
//
// The hand-off of the result goes through an atomic (release, then
// acquire), so it is ordered for ThreadSanitizer even when the callback
// runs inside an uninstrumented library.
#pragma once

#include <atomic>
#include <coroutine>
#include <functional>
#include <optional>
#include <utility>

#include "core/task.h"

namespace granary {
namespace internal {

template <typename T>
class CallbackAwaiter {
 public:
  using Start = std::function<void(std::function<void(T)>)>;
  explicit CallbackAwaiter(Start start) : start_(std::move(start)) {}

  bool await_ready() const noexcept { return false; }

  // The coroutine counts as suspended from here: the callback may resume it
  // on another thread while this runs, so nothing of this awaiter (which
  // lives in the coroutine's frame) is touched after the hand-off.
  bool await_suspend(std::coroutine_handle<> h) {
    handle_ = h;
    start_([this](T value) {
      value_.emplace(std::move(value));
      if (state_.exchange(kDone, std::memory_order_acq_rel) == kSuspended) {
        handle_.resume();
      }
    });
    // kRunning: the callback has not run yet, and resumes the coroutine
    // when it does. kDone: it ran already, so the coroutine goes on here.
    return state_.exchange(kSuspended, std::memory_order_acq_rel) != kDone;
  }

  T await_resume() { return std::move(*value_); }

 private:
  enum State : int { kRunning, kSuspended, kDone };
  Start start_;
  std::coroutine_handle<> handle_;
  std::optional<T> value_;
  std::atomic<int> state_{kRunning};
};

}  // namespace internal

// Awaits the value `start(done)` reports through `done` (exactly once).
template <typename T>
internal::CallbackAwaiter<T> FromCallback(
    std::function<void(std::function<void(T)>)> start) {
  return internal::CallbackAwaiter<T>(std::move(start));
}

}  // namespace granary
