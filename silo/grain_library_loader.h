// Loads grain libraries (silo/grain_library.h) into a silo: SiloHost does for
// every path of its grain_library option (granary-silo --grain_library).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "silo/grain_library.h"

namespace granary::silo {

class Runtime;

// What a grain library says of itself before it is loaded: the text of its
// `.granary_library` section.
struct GrainLibraryNote {
  int abi = 0;
  std::string version;  // the Granary version it was built against
};

// Reads the note of the ELF shared library at `path` without loading it:
// NOT_FOUND when it has none (no GRANARY_GRAIN_LIBRARY in it),
// INVALID_ARGUMENT when the file is not a 64-bit ELF shared library or its
// note is malformed, and the errno's status when it cannot be read.
absl::StatusOr<GrainLibraryNote> ReadGrainLibraryNote(const std::string& path);

// Whether `path` is a grain library this silo can load (read, not loaded):
// INVALID_ARGUMENT, naming the path, the versions and what to do, when not.
absl::Status CheckGrainLibrary(const std::string& path);

// A grain library loaded into this process. It stays loaded until the
// process exits (grain code may run in any activation until then); loading
// the same path again returns the same library.
class GrainLibrary {
 public:
  // Checks the library (CheckGrainLibrary), loads it and checks what its
  // entry point says of it again.
  static absl::StatusOr<GrainLibrary> Load(const std::string& path);

  // Adds the library's grain types to `runtime` (before it starts).
  absl::Status AddTo(Runtime& runtime) const;

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }

 private:
  GrainLibrary(std::string path, const GranaryGrainLibrary* entry);

  std::string path_;
  std::string name_;
  const GranaryGrainLibrary* entry_;
};

}  // namespace granary::silo
