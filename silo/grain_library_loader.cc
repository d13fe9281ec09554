#include "silo/grain_library_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/log.h"
#include "core/version.h"

namespace granary::silo {
namespace {

constexpr char kSection[] = ".granary_library";
constexpr char kEntryPoint[] = "granary_grain_library_v1";
// Bounds on what is read of a file: a section-name table or a note past
// these is not one a linker wrote.
constexpr uint64_t kMaxNames = 1 << 20;
constexpr uint64_t kMaxNote = 4096;
// The ELF machine this silo was built for.
#if defined(__x86_64__)
constexpr Elf64_Half kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr Elf64_Half kMachine = EM_AARCH64;
#else
#error "grain libraries: unknown ELF machine"
#endif

// Reads `size` bytes at `offset` of `fd`, all or nothing, within `file_size`.
bool ReadAt(int fd, uint64_t file_size, uint64_t offset, uint64_t size,
            void* out) {
  if (offset > file_size || size > file_size - offset) return false;
  char* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
  return true;
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

absl::Status NotElf(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--grain_library=", path,
                   " is not a 64-bit ELF shared library (", why, ")"));
}

// "granary-grain-library abi=N version=X.Y.Z".
absl::StatusOr<GrainLibraryNote> ParseNote(const std::string& path,
                                           absl::string_view text) {
  GrainLibraryNote note;
  std::vector<absl::string_view> words = absl::StrSplit(text, ' ');
  bool abi = false;
  if (words.size() == 3 && words[0] == "granary-grain-library" &&
      absl::ConsumePrefix(&words[1], "abi=") &&
      absl::SimpleAtoi(words[1], &note.abi) &&
      absl::ConsumePrefix(&words[2], "version=") && !words[2].empty()) {
    abi = true;
    note.version = std::string(words[2]);
  }
  if (!abi) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grain_library=", path, " has a malformed ", kSection, " section"));
  }
  return note;
}

std::string Mismatch(const std::string& path, int abi,
                     absl::string_view version) {
  return absl::StrCat(
      "--grain_library=", path, " was built against Granary ", version,
      " (grain library ABI ", abi, "); this silo runs Granary ", kVersion,
      " (ABI ", GRANARY_GRAIN_LIBRARY_ABI,
      "): a grain library runs only in a silo of the version it was built "
      "against, so rebuild it with granary-dev ",
      kVersion);
}

std::string NoEntryPoint(const std::string& path) {
  return absl::StrCat(
      "--grain_library=", path, " has no Granary grain-library entry point (",
      kEntryPoint,
      "): a grain library declares its grain types with "
      "GRANARY_GRAIN_LIBRARY (silo/grain_library.h); this silo runs Granary ",
      kVersion, " (grain library ABI ", GRANARY_GRAIN_LIBRARY_ABI, ")");
}

}  // namespace

// Found by dlsym only in a binary that exports its symbols, as a silo that
// loads grain libraries must.
extern "C" __attribute__((visibility("default"), used)) void
granary_silo_exports_its_runtime() {}

absl::StatusOr<GrainLibraryNote> ReadGrainLibraryNote(const std::string& path) {
  // O_NONBLOCK: a FIFO named by mistake must not hang --check_config.
  Fd f{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) {
    const int e = errno;
    return absl::Status(absl::ErrnoToStatusCode(e),
                        absl::StrCat("--grain_library=", path,
                                     " cannot be read: ", std::strerror(e)));
  }
  struct stat st;
  if (fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grain_library=", path, " is not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr eh;
  if (!ReadAt(f.fd, size, 0, sizeof(eh), &eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return NotElf(path, "no ELF header");
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return NotElf(path, "not 64-bit little-endian");
  }
  if (eh.e_type != ET_DYN) return NotElf(path, "not a shared object");
  if (eh.e_machine != kMachine) {
    return NotElf(path, absl::StrCat("built for machine ", eh.e_machine,
                                     ", this silo runs on ", kMachine));
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      eh.e_shstrndx >= eh.e_shnum) {
    return NotElf(path, "no section table");
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (!ReadAt(f.fd, size, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr),
              sections.data())) {
    return NotElf(path, "section table past the end of the file");
  }
  const Elf64_Shdr& names_header = sections[eh.e_shstrndx];
  if (names_header.sh_size > kMaxNames) {
    return NotElf(path, "section names too large");
  }
  std::string names(names_header.sh_size, '\0');
  if (!ReadAt(f.fd, size, names_header.sh_offset, names.size(), names.data())) {
    return NotElf(path, "section names past the end of the file");
  }
  for (const Elf64_Shdr& s : sections) {
    if (s.sh_name >= names.size()) continue;
    if (std::strcmp(names.c_str() + s.sh_name, kSection) != 0) continue;
    if (s.sh_type == SHT_NOBITS || s.sh_size == 0 || s.sh_size > kMaxNote) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--grain_library=", path, " has a malformed ", kSection, " section"));
    }
    std::string text(s.sh_size, '\0');
    if (!ReadAt(f.fd, size, s.sh_offset, text.size(), text.data())) {
      return NotElf(path, "a section past the end of the file");
    }
    // The first NUL-terminated string (one GRANARY_GRAIN_LIBRARY).
    text.resize(std::strlen(text.c_str()));
    return ParseNote(path, text);
  }
  return absl::NotFoundError(NoEntryPoint(path));
}

absl::Status CheckGrainLibrary(const std::string& path) {
  absl::StatusOr<GrainLibraryNote> note = ReadGrainLibraryNote(path);
  if (!note.ok()) {  // refused at start, whatever the reason
    return absl::InvalidArgumentError(note.status().message());
  }
  if (note->abi != GRANARY_GRAIN_LIBRARY_ABI || note->version != kVersion) {
    return absl::InvalidArgumentError(Mismatch(path, note->abi, note->version));
  }
  return absl::OkStatus();
}

GrainLibrary::GrainLibrary(std::string path, const GranaryGrainLibrary* entry)
    : path_(std::move(path)),
      name_(entry->name != nullptr ? entry->name : ""),
      entry_(entry) {}

absl::StatusOr<GrainLibrary> GrainLibrary::Load(const std::string& path) {
  if (absl::Status s = CheckGrainLibrary(path); !s.ok()) return s;
  // The file checked is the file loaded: dlopen searches the library path
  // for a name without a slash, so it gets the real path.
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) {
    const int e = errno;
    return absl::InvalidArgumentError(absl::StrCat(
        "--grain_library=", path, " cannot be read: ", std::strerror(e)));
  }
  const std::string resolved(real);
  std::free(real);
  if (dlsym(RTLD_DEFAULT, "granary_silo_exports_its_runtime") == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--grain_library=", path,
        ": this silo binary does not export the runtime a grain library "
        "calls (link it with granary_silo_loads_grain_libraries(TARGET), "
        "docs/sdk.md)"));
  }
  // RTLD_NOW: a symbol the library needs and the silo lacks fails here,
  // at start, not in the middle of a call.
  void* handle = dlopen(resolved.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::InvalidArgumentError(absl::StrCat(
        "--grain_library=", path,
        " cannot be loaded: ", why != nullptr ? why : "unknown error"));
  }
  auto entry =
      reinterpret_cast<GranaryGrainLibraryEntry>(dlsym(handle, kEntryPoint));
  if (entry == nullptr) {
    dlclose(handle);
    return absl::InvalidArgumentError(NoEntryPoint(path));
  }
  // Never closed from here on: its code may run until the process exits.
  const GranaryGrainLibrary* library = entry();
  if (library == nullptr || library->abi != GRANARY_GRAIN_LIBRARY_ABI ||
      library->granary_version == nullptr ||
      std::strcmp(library->granary_version, kVersion) != 0 ||
      library->add_grains == nullptr) {
    return absl::InvalidArgumentError(
        Mismatch(path, library != nullptr ? static_cast<int>(library->abi) : 0,
                 library != nullptr && library->granary_version != nullptr
                     ? library->granary_version
                     : "(unknown)"));
  }
  return GrainLibrary(path, library);
}

absl::Status GrainLibrary::AddTo(Runtime& runtime) const {
  char error[512] = {0};
  const int code = entry_->add_grains(&runtime, error, sizeof(error));
  if (code == 0) return absl::OkStatus();
  return absl::Status(code > 0 && code <= 16
                          ? static_cast<absl::StatusCode>(code)
                          : absl::StatusCode::kInternal,
                      absl::StrCat("grain library ", name_, " (", path_,
                                   ") did not add its grain types: ", error));
}

}  // namespace granary::silo
