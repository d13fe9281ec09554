// File: core/detach.h
// -----------------------------------------------------------------------------
// Starts a Task without awaiting it; `done` receives its outcome on whichever
// thread finishes the task.
//
//   granary::Detach(counter.Add(req), [](absl::StatusOr<CounterValue> v)
//   {...}); granary::Detach(DoWork(), [](absl::Status s) {...});   //
//   Task<void>
//
// For code outside grains (clients, load generators, tests). Inside grain
// code, prefer awaiting; a detached task started there runs its first part
// in the current turn.
#pragma once

#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/status.h"
#include "core/task.h"

namespace granary {

template <typename T, typename Done>
void Detach(Task<T> task, Done done) {
  struct State {
    typename Task<T>::Handle handle;
    Done done;
  };
  auto* state = new State{task.Release(), std::move(done)};
  // The handle is stored before the task starts: it may finish inside
  // resume(), and the completion reads it.
  state->handle.promise().set_done(
      [](void* ctx) {
        auto* s = static_cast<State*>(ctx);
        auto h = s->handle;
        if constexpr (std::is_void_v<T>) {
          absl::Status result;
          if (h.promise().exception()) {
            result = StatusFromException(h.promise().exception());
          }
          h.destroy();
          s->done(std::move(result));
        } else {
          absl::StatusOr<T> result =
              h.promise().exception()
                  ? absl::StatusOr<T>(
                        StatusFromException(h.promise().exception()))
                  : absl::StatusOr<T>(std::move(h.promise().value()));
          h.destroy();
          s->done(std::move(result));
        }
        delete s;
      },
      state);
  auto h = state->handle;  // `state` may be freed while h runs
  h.resume();
}

// Like Detach for a task whose value is itself a StatusOr: `done` gets one
// absl::StatusOr<R> (an exception thrown inside becomes its status).
//
//   DetachFlat(directory.Lookup(id), [](absl::StatusOr<v1::DirectoryReply> r)
//   {...});
template <typename R, typename Done>
void DetachFlat(Task<absl::StatusOr<R>> task, Done done) {
  Detach(std::move(task),
         [done = std::move(done)](absl::StatusOr<absl::StatusOr<R>> r) mutable {
           done(Flatten(std::move(r)));
         });
}

}  // namespace granary
