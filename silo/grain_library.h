// Grain libraries: grain types in a shared library that the packaged silo
// loads at start (granary-silo --grain_library=/path/libmygrains.so).
//
// A library names the function that adds its grain types, once, in one of
// its source files:
//
//   #include "silo/grain_library.h"
//
//   GRANARY_GRAIN_LIBRARY(mygrains, [](granary::silo::Runtime& runtime) {
//     return runtime.AddGrain<MyGrain>();
//   });
//
// and is built with granary_grain_library(... LOADABLE) of the installed
// CMake package, which compiles it against the headers alone: the runtime it
// calls is the silo's own, resolved when the silo loads it. So a library
// runs only in a silo of the very Granary version it was built against; the
// silo reads that version from the file before it loads it, and refuses any
// other, naming both.
//
// What the macro defines, for other build systems and languages:
//   - the C entry point `granary_grain_library_v1`, returning a
//     GranaryGrainLibrary (below);
//   - the section `.granary_library` holding the text
//     "granary-grain-library abi=1 version=X.Y.Z", read without loading.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "absl/status/status.h"
#include "core/version.h"

namespace granary::silo {
class Runtime;
}  // namespace granary::silo

// The entry point's ABI: what GranaryGrainLibrary holds and how its calls
// behave. It changes (with the entry point's name) only when they do.
#define GRANARY_GRAIN_LIBRARY_ABI 1

extern "C" {

struct GranaryGrainLibrary {
  // GRANARY_GRAIN_LIBRARY_ABI as the library was built.
  uint32_t abi;
  // The Granary version the library was built against (core/version.h).
  const char* granary_version;
  // The library's name, for the silo's log.
  const char* name;
  // Adds the library's grain types to `runtime` (a granary::silo::Runtime).
  // Returns 0, or writes the reason (NUL-terminated, cut to `error_size`)
  // and returns the absl::StatusCode of the failure.
  int (*add_grains)(void* runtime, char* error, size_t error_size);
};

// The entry point, as the silo looks it up (dlsym).
typedef const GranaryGrainLibrary* (*GranaryGrainLibraryEntry)(void);

}  // extern "C"

namespace granary::silo::grain_library_internal {

// Runs `add` on the runtime behind `runtime`, turning its status (or an
// exception) into the entry point's C answer.
template <typename Add>
int AddGrains(Add& add, void* runtime, char* error, size_t error_size) {
  absl::Status s;
  try {
    s = add(*static_cast<Runtime*>(runtime));
  } catch (const std::exception& e) {
    s = absl::InternalError(std::string("threw: ") + e.what());
  } catch (...) {
    s = absl::InternalError("threw an exception");
  }
  if (s.ok()) return 0;
  if (error != nullptr && error_size > 0) {
    std::snprintf(error, error_size, "%s", std::string(s.message()).c_str());
  }
  return static_cast<int>(s.code());
}

}  // namespace granary::silo::grain_library_internal

#define GRANARY_GRAIN_LIBRARY_STR2(x) #x
#define GRANARY_GRAIN_LIBRARY_STR(x) GRANARY_GRAIN_LIBRARY_STR2(x)

#if defined(__has_attribute)
#if __has_attribute(retain)
#define GRANARY_GRAIN_LIBRARY_RETAIN __attribute__((retain))
#endif
#endif
#ifndef GRANARY_GRAIN_LIBRARY_RETAIN
#define GRANARY_GRAIN_LIBRARY_RETAIN
#endif

// Declares this shared library's grain types: `name` (an identifier, for the
// log), then a callable taking granary::silo::Runtime& and returning
// absl::Status (commas in it need no parentheses). Once per library. The
// version is the literal of the headers the library is compiled with, never
// a symbol the loading silo could resolve to its own.
#define GRANARY_GRAIN_LIBRARY(name, ...)                                       \
  __attribute__((section(".granary_library"), used))                           \
  GRANARY_GRAIN_LIBRARY_RETAIN static const char                               \
      granary_grain_library_note_[] =                                          \
          "granary-grain-library abi=" GRANARY_GRAIN_LIBRARY_STR(              \
              GRANARY_GRAIN_LIBRARY_ABI) " version=" GRANARY_VERSION_STRING;   \
  extern "C" __attribute__((visibility("default"))) const GranaryGrainLibrary* \
  granary_grain_library_v1(void) {                                             \
    static auto add_ = __VA_ARGS__;                                            \
    static const GranaryGrainLibrary library = {                               \
        GRANARY_GRAIN_LIBRARY_ABI, GRANARY_VERSION_STRING, #name,              \
        [](void* runtime, char* error, size_t error_size) {                    \
          return ::granary::silo::grain_library_internal::AddGrains(           \
              add_, runtime, error, error_size);                               \
        }};                                                                    \
    /* the note's address is used: no --gc-sections drops it */                \
    __asm__ volatile("" : : "g"(granary_grain_library_note_));                 \
    return &library;                                                           \
  }
