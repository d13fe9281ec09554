// File: core/when_all.h
// -----------------------------------------------------------------------------
// Awaits several tasks that run at once, e.g. a grain calling N others in
// parallel and gathering their replies.
//
//   std::vector<Task<PingReply>> calls;
//   for (auto& leaf : leaves) calls.push_back(leaf.Ping(req));
//   std::vector<absl::StatusOr<PingReply>> replies =
//       co_await WhenAll(std::move(calls));
//
// Every task is started at once (each runs until its first suspension); the
// awaiting coroutine resumes after the last one finished, on the thread that
// finished it: inside grain code, a turn of the same activation (replies
// are messages of the awaiting activation). Failures are per task.
#pragma once

#include <atomic>
#include <coroutine>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/detach.h"
#include "core/task.h"

namespace granary {

template <typename T>
Task<std::vector<absl::StatusOr<T>>> WhenAll(std::vector<Task<T>> tasks) {
  static_assert(!std::is_void_v<T>, "WhenAll gathers values: use Task<T>");
  struct State {
    explicit State(size_t n) : left(n + 1), results(n) {}
    // Tasks not finished, plus one for the awaiter itself: whoever brings
    // it to zero resumes the awaiter (or the awaiter does not suspend).
    std::atomic<size_t> left;
    std::vector<std::optional<absl::StatusOr<T>>> results;
    std::coroutine_handle<> waiter;
  };
  struct Awaiter {
    State* state;
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) noexcept {
      state->waiter = h;
      return state->left.fetch_sub(1, std::memory_order_acq_rel) != 1;
    }
    void await_resume() const noexcept {}
  };
  auto state = std::make_shared<State>(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    Detach(std::move(tasks[i]), [state, i](absl::StatusOr<T> r) {
      state->results[i].emplace(std::move(r));
      if (state->left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        state->waiter.resume();
      }
    });
  }
  co_await Awaiter{state.get()};
  std::vector<absl::StatusOr<T>> out;
  out.reserve(state->results.size());
  for (auto& r : state->results) out.push_back(std::move(*r));
  co_return out;
}

}  // namespace granary
