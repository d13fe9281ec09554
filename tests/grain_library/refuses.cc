// A grain library whose grain types cannot be added: the silo does not
// start, and says why.
#include "absl/status/status.h"
#include "silo/grain_library.h"

GRANARY_GRAIN_LIBRARY(refuses, [](granary::silo::Runtime&) {
  return absl::FailedPreconditionError("this library refuses on purpose");
});
