#include "silo/runtime/call_filter.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace granary::silo {

absl::Status FilterThrew(size_t index, const CallFilterContext& call,
                         std::exception_ptr thrown) {
  return absl::InternalError(
      absl::StrCat("call filter #", index, " threw calling ",
                   call.target.ToString(), " ", call.method.name, ": ",
                   StatusFromException(thrown).message()));
}

}  // namespace granary::silo
