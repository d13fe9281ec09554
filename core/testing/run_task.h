// File: core/testing/run_task.h
// -----------------------------------------------------------------------------
// For tests outside coroutines: runs a Task that reports its outcome as a
// status to completion on the calling thread (blocking it), and returns
// that status. An exception escaping the task becomes its status too, so
// one StatusIs assertion covers both.
//
//   EXPECT_THAT(RunTask(storage.Write(id, "v2", stale_etag)),
//               StatusIs(absl::StatusCode::kAborted));
//   absl::StatusOr<StoredState> s = RunTask(storage.Read(id));
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/status.h"
#include "core/task.h"

namespace granary {

template <typename T>
absl::StatusOr<T> RunTask(Task<absl::StatusOr<T>> task) {
  return Flatten(std::move(task).Get());
}

inline absl::Status RunTask(Task<absl::Status> task) {
  return Flatten(std::move(task).Get());
}

}  // namespace granary
