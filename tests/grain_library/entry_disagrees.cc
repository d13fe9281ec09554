// A note that says this Granary version and an entry point that says
// another (a library patched by hand): refused when loaded.
#include <cstddef>

#include "core/version.h"
#include "silo/grain_library.h"

__attribute__((section(".granary_library"), used)) static const char kNote[] =
    "granary-grain-library abi=1 version=" GRANARY_VERSION_STRING;

namespace {
int AddNothing(void*, char*, size_t) { return 0; }
}  // namespace

extern "C" __attribute__((visibility("default"))) const GranaryGrainLibrary*
granary_grain_library_v1(void) {
  static const GranaryGrainLibrary library = {1, "9.9.9", "disagrees",
                                              AddNothing};
  return &library;
}
