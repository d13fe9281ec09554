// File: core/status.h
// -----------------------------------------------------------------------------
// Status helpers shared by every component.
//
// Abseil 20220623 has no RETURN_IF_ERROR / ASSIGN_OR_RETURN; they are defined
// here once:
//
//   absl::Status Load() {
//     GRANARY_RETURN_IF_ERROR(Open());
//     GRANARY_ASSIGN_OR_RETURN(std::string bytes, Read());
//     ...
//   }
//
// Grain code reports a chosen status by throwing `StatusError`; any other
// exception thrown by grain code reaches the caller as INTERNAL with its
// message. Awaiting a grain reference that fails throws `StatusError`.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary {

// An exception carrying an absl::Status. Only grain code and the coroutine
// plumbing that connects it to the runtime throw it; component interfaces
// return absl::Status.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status);
  const absl::Status& status() const noexcept { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  absl::Status status_;
  std::string what_;
};

// Turns an exception thrown by grain code into the status its caller sees:
// StatusError keeps its status (an OK status becomes INTERNAL), any other
// std::exception becomes INTERNAL with what(), anything else INTERNAL.
absl::Status StatusFromException(const std::exception_ptr& e);

// The outcome of a task whose result is itself a status, as Detach or
// Task::Get deliver it (the outer status is the task's exception): one
// status, the exception's or the task's own.
//
//   Detach(storage.Read(id),
//          [](absl::StatusOr<absl::StatusOr<StoredState>> r) {
//            absl::StatusOr<StoredState> state = Flatten(std::move(r));
//          });
template <typename T>
absl::StatusOr<T> Flatten(absl::StatusOr<absl::StatusOr<T>> r) {
  if (!r.ok()) return r.status();
  return *std::move(r);
}
inline absl::Status Flatten(absl::StatusOr<absl::Status> r) {
  if (!r.ok()) return r.status();
  return *std::move(r);
}

}  // namespace granary

#define GRANARY_STATUS_CONCAT_INNER_(a, b) a##b
#define GRANARY_STATUS_CONCAT_(a, b) GRANARY_STATUS_CONCAT_INNER_(a, b)

#define GRANARY_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status granary_status_ = (expr);           \
    if (!granary_status_.ok()) return granary_status_; \
  } while (false)

#define GRANARY_ASSIGN_OR_RETURN(lhs, expr) \
  GRANARY_ASSIGN_OR_RETURN_IMPL_(           \
      GRANARY_STATUS_CONCAT_(granary_statusor_, __LINE__), lhs, expr)

#define GRANARY_ASSIGN_OR_RETURN_IMPL_(var, lhs, expr) \
  auto var = (expr);                                   \
  if (!var.ok()) return std::move(var).status();       \
  lhs = std::move(var).value()
