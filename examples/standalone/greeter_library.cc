// The Greeter grain as a grain library for the packaged silo:
//   granary-silo --grain_library=libgreeter.so
#include "greeter_grain.h"
#include "silo/grain_library.h"
#include "silo/runtime/runtime.h"

GRANARY_GRAIN_LIBRARY(greeter, [](granary::silo::Runtime& runtime) {
  return runtime.AddGrain<granary::standalone::GreeterGrain>();
});
