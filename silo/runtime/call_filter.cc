#include "silo/runtime/call_filter.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace granary::silo {

Task<absl::Status> RunCallFilters(const std::vector<CallFilter>& filters,
                                  CallFilterContext& call) {
  for (size_t i = 0; i < filters.size(); ++i) {
    absl::Status status;
    std::exception_ptr thrown;
    try {
      status = co_await filters[i](call);
    } catch (...) {
      thrown = std::current_exception();
    }
    if (thrown) {
      co_return absl::InternalError(
          absl::StrCat("call filter #", i, " threw calling ",
                       call.target.ToString(), " ", call.method.name, ": ",
                       StatusFromException(thrown).message()));
    }
    if (!status.ok()) co_return status;
  }
  co_return absl::OkStatus();
}

}  // namespace granary::silo
