// File: core/task.h
// -----------------------------------------------------------------------------
// `granary::Task<T>`: the coroutine type of grain methods and grain references.
//
// A Task is lazy (nothing runs until it is awaited or started), move-only, and
// owns its coroutine frame. Awaiting a Task runs it and resumes the awaiter by
// symmetric transfer when it finishes; an exception thrown inside propagates to
// the awaiter.
//
//   granary::Task<int> Twice(CounterRef c) {
//     CounterValue v = co_await c.Get(GetRequest{});
//     co_return 2 * v.value();
//   }
//
// Outside any coroutine, `Get()` (core/sync_wait.h) runs a Task to completion
// and returns `absl::StatusOr<T>`.
//
// Threading: a Task is used by one thread at a time; the runtime decides on
// which thread its frame resumes.
//
// Compiler hazard (GCC 12): inside a coroutine, a lambda temporary whose
// captures have destructors (a std::string, a std::function), written in
// the operand of a co_await, has been seen destroyed twice ("free():
// invalid pointer"). Name it first, then move it in:
//
//   std::function<absl::StatusOr<int>(PgConnection&)> job = [s = str](...)
//   {...}; co_return co_await pool.Run<int>(std::move(job));
//
// Lambdas capturing only `this` and references are not affected.
#pragma once

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/frame_pool.h"
#include "core/status.h"
#include "core/sync.h"

namespace granary {

template <typename T = void>
class Task;

namespace internal {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long Task::Get spins before it blocks: most calls inside a silo answer
// within microseconds, and sleeping would add a thread wake-up to each. A
// caller waiting on remote calls (a hundred microseconds and more) would
// only burn a core the silo's threads could use, so each thread adapts:
// a call that took longer than kGetSlowCallNs halves its spin, down to none
// below kGetSpinMinNs; a call that answered within kGetSpinMaxNs (spun for
// or slept through) brings the full spin back; one in between (the slow
// tail of local calls) leaves it as it is. Times, not pause counts, so the
// bound is the same on every CPU.
inline constexpr int64_t kGetSpinMaxNs = 20'000;
inline constexpr int64_t kGetSpinMinNs = 1'000;
inline constexpr int64_t kGetSlowCallNs = 50'000;
inline thread_local constinit int64_t get_spin_ns = kGetSpinMaxNs;

// The spin after a call that spun for up to `spin_ns` and took `took_ns`.
constexpr int64_t NextGetSpin(int64_t spin_ns, int64_t took_ns) {
  if (took_ns <= kGetSpinMaxNs) return kGetSpinMaxNs;
  if (took_ns <= kGetSlowCallNs) return spin_ns;
  return spin_ns / 2 < kGetSpinMinNs ? 0 : spin_ns / 2;
}

inline int64_t SpinClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Waits for `done`: spins for this thread's spin first, then blocks.
inline void SpinThenWait(Notification& done) {
  const int64_t start = SpinClockNs();
  const int64_t spin = get_spin_ns;
  if (spin > 0) {
    for (int i = 1; !done.HasBeenNotified(); ++i) {
      CpuRelax();
      if (i % 16 == 0 && SpinClockNs() - start >= spin) break;
    }
  }
  done.WaitForNotification();
  get_spin_ns = NextGetSpin(spin, SpinClockNs() - start);
}

// Called when a started (detached) task reaches its final suspend point,
// instead of resuming an awaiting coroutine. It may destroy the frame.
using TaskDoneFn = void (*)(void* ctx);

class TaskPromiseBase {
 public:
  // Frames come from this thread's frame cache (core/frame_pool.h).
  static void* operator new(size_t size) { return AllocateFrame(size); }
  static void operator delete(void* p, size_t size) noexcept {
    FreeFrame(p, size);
  }

  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      TaskPromiseBase& p = h.promise();
      if (p.continuation_) return p.continuation_;
      if (p.done_fn_ != nullptr) p.done_fn_(p.done_ctx_);  // may destroy h
      return std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() const noexcept { return {}; }
  FinalAwaiter final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept { exception_ = std::current_exception(); }

  void set_continuation(std::coroutine_handle<> c) noexcept {
    continuation_ = c;
  }
  void set_done(TaskDoneFn fn, void* ctx) noexcept {
    done_fn_ = fn;
    done_ctx_ = ctx;
  }
  const std::exception_ptr& exception() const noexcept { return exception_; }
  void RethrowIfFailed() const {
    if (exception_) std::rethrow_exception(exception_);
  }

 private:
  std::coroutine_handle<> continuation_;
  TaskDoneFn done_fn_ = nullptr;
  void* done_ctx_ = nullptr;
  std::exception_ptr exception_;
};

template <typename T>
class TaskPromise final : public TaskPromiseBase {
 public:
  Task<T> get_return_object() noexcept;

  template <typename U>
  requires std::is_convertible_v<U&&, T>
  void return_value(U&& v) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    value_.emplace(std::forward<U>(v));
  }

  // Moves the result out, or rethrows the task's exception.
  T TakeResult() {
    RethrowIfFailed();
    return std::move(*value_);
  }
  bool has_value() const noexcept { return value_.has_value(); }
  T& value() noexcept { return *value_; }

 private:
  std::optional<T> value_;
};

template <>
class TaskPromise<void> final : public TaskPromiseBase {
 public:
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void TakeResult() { RethrowIfFailed(); }
};

}  // namespace internal

template <typename T>
class [[nodiscard]] Task {
 public:
  using promise_type = internal::TaskPromise<T>;
  using Handle = std::coroutine_handle<promise_type>;
  using value_type = T;

  Task() noexcept = default;
  explicit Task(Handle h) noexcept : handle_(h) {}
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { Reset(); }

  bool valid() const noexcept { return static_cast<bool>(handle_); }

  auto operator co_await() && noexcept {
    struct Awaiter {
      Handle h;
      bool await_ready() const noexcept { return !h || h.done(); }
      std::coroutine_handle<> await_suspend(
          std::coroutine_handle<> caller) noexcept {
        h.promise().set_continuation(caller);
        return h;
      }
      T await_resume() { return h.promise().TakeResult(); }
    };
    return Awaiter{handle_};
  }

  // Runs the task to completion on this thread (and whichever threads resume
  // it), blocking until it finishes. For code outside coroutines; never call
  // it from grain code, which would block a worker.
  auto Get() && -> std::conditional_t<std::is_void_v<T>, absl::Status,
                                      absl::StatusOr<T>>;

  // Gives up ownership of the frame. The caller becomes responsible for
  // destroying it (the runtime does so from the done callback).
  Handle Release() noexcept { return std::exchange(handle_, {}); }

 private:
  void Reset() noexcept {
    if (handle_) handle_.destroy();
    handle_ = {};
  }

  Handle handle_;
};

namespace internal {

template <typename T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<TaskPromise<T>>::from_promise(*this));
}

inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>(
      std::coroutine_handle<TaskPromise<void>>::from_promise(*this));
}

// Starts `task` without an awaiting coroutine. When it finishes, `done(ctx)`
// is called on the finishing thread, with the frame still alive at its final
// suspend point; `done` must eventually destroy the returned handle.
template <typename T>
typename Task<T>::Handle StartDetached(Task<T> task, TaskDoneFn done,
                                       void* ctx) {
  auto h = task.Release();
  h.promise().set_done(done, ctx);
  h.resume();
  return h;
}

}  // namespace internal

template <typename T>
auto Task<T>::Get() && -> std::conditional_t<std::is_void_v<T>, absl::Status,
                                             absl::StatusOr<T>> {
  Notification done;
  auto h = internal::StartDetached(
      std::move(*this),
      [](void* ctx) { static_cast<Notification*>(ctx)->Notify(); }, &done);
  // Spins briefly before sleeping, as long as this thread's calls answer
  // quickly (internal::SpinThenWait).
  internal::SpinThenWait(done);
  struct Destroy {
    Handle h;
    ~Destroy() { h.destroy(); }
  } destroy{h};
  try {
    if constexpr (std::is_void_v<T>) {
      h.promise().TakeResult();
      return absl::OkStatus();
    } else {
      return h.promise().TakeResult();
    }
  } catch (...) {
    return StatusFromException(std::current_exception());
  }
}

}  // namespace granary
