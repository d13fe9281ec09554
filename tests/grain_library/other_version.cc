// What a grain library built against Granary 0.0.1 looks like from the
// outside: the note and the entry point, by hand.
#include <cstddef>

#include "silo/grain_library.h"

__attribute__((section(".granary_library"), used)) static const char kNote[] =
    "granary-grain-library abi=1 version=0.0.1";

namespace {
int AddNothing(void*, char*, size_t) { return 0; }
}  // namespace

extern "C" __attribute__((visibility("default"))) const GranaryGrainLibrary*
granary_grain_library_v1(void) {
  static const GranaryGrainLibrary library = {1, "0.0.1", "other_version",
                                              AddNothing};
  return &library;
}
