#include "core/status.h"

#include <utility>

namespace granary {

StatusError::StatusError(absl::Status status)
    : status_(status.ok()
                  ? absl::InternalError("StatusError thrown with an OK status")
                  : std::move(status)),
      what_(status_.ToString()) {}

absl::Status StatusFromException(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const StatusError& err) {
    return err.status();
  } catch (const std::exception& err) {
    return absl::InternalError(err.what());
  } catch (...) {
    return absl::InternalError("grain code threw a non-std exception");
  }
}

}  // namespace granary
