// File: core/completion.h
// -----------------------------------------------------------------------------
// `granary::Completion<T>`: a one-shot awaitable that a callback-style
// producer completes. It turns "start this, and call me back with the
// result" into a `co_await` inside a coroutine, without blocking a thread:
//
//   Task<absl::StatusOr<std::string>> Store::Write(std::string bytes) {
//     Completion<absl::StatusOr<std::string>> done;
//     writer_.Enqueue(std::move(bytes),
//                     [&done](absl::StatusOr<std::string> r) {
//                       done.Complete(std::move(r));  // on the writer thread
//                     });
//     co_return co_await done;
//   }
//
// The producer may call Complete before the coroutine reaches its
// `co_await` (an operation that finishes at once, or a fast thread): the
// await then does not suspend. Otherwise Complete resumes the coroutine
// inline, on the completing thread, and returns when the coroutine next
// suspends or finishes. So whatever follows the `co_await` runs on the
// producer's thread and must not block it; the runtime only ever lets such
// a continuation post a message (a grain resumes on a worker, never there).
//
// Lifetime: the Completion lives in the awaiting coroutine's frame. Complete
// must be called exactly once (twice is a crash), and the producer must not
// touch the Completion after Complete: the resumed coroutine may free it
// before Complete returns. The awaiting coroutine must not be destroyed
// while it waits (a started Task never is).
//
// Threading: Complete and the await may run on different threads at once;
// the value written by Complete is visible to await_resume (release/acquire
// on one atomic state).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

namespace granary {

template <typename T>
class Completion {
 public:
  Completion() = default;
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  // Stores `value` and resumes the awaiting coroutine if it is suspended.
  void Complete(T value) {
    value_.emplace(std::move(value));
    const State before =
        state_.exchange(State::kDone, std::memory_order_acq_rel);
    if (before == State::kDone) {
      std::fputs("granary::Completion completed twice\n", stderr);
      std::abort();
    }
    if (before == State::kWaiting) {
      // The coroutine is suspended and cannot free `this` until resumed.
      std::coroutine_handle<> waiter = waiter_;
      waiter.resume();
    }
  }

  bool await_ready() const noexcept {
    return state_.load(std::memory_order_acquire) == State::kDone;
  }
  // False (do not suspend) when Complete got there first.
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    waiter_ = h;
    State expected = State::kEmpty;
    return state_.compare_exchange_strong(expected, State::kWaiting,
                                          std::memory_order_acq_rel,
                                          std::memory_order_acquire);
  }
  T await_resume() { return std::move(*value_); }

 private:
  enum class State { kEmpty, kWaiting, kDone };
  std::atomic<State> state_{State::kEmpty};
  std::optional<T> value_;
  std::coroutine_handle<> waiter_;
};

}  // namespace granary
