#include "core/thread_top.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#if defined(__GNUG__)
#include <cxxabi.h>
#endif

#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace granary {
namespace {

// The readable name of `type` ("std::runtime_error"), or "unknown".
std::string TypeName(const std::type_info* type) {
  if (type == nullptr) return "unknown";
#if defined(__GNUG__)
  int status = 0;
  char* demangled =
      abi::__cxa_demangle(type->name(), nullptr, nullptr, &status);
  if (status == 0 && demangled != nullptr) {
    std::string name = demangled;
    std::free(demangled);
    return name;
  }
#endif
  return type->name();
}

[[noreturn]] void Die(absl::string_view thread_name, absl::string_view type,
                      absl::string_view what) {
  try {
    GRANARY_LOG(kError) << "thread=" << LogQuote(thread_name)
                        << " exception=" << LogQuote(type)
                        << " what=" << LogQuote(what)
                        << " uncaught exception at the top of a thread; "
                           "exiting with code "
                        << kThreadTopExitCode;
    // The same for a reader of the raw stream when the log is JSON.
    const std::string plain = absl::StrCat(
        "granary: thread ", LogQuote(thread_name),
        " ended by an uncaught exception ", LogQuote(type), ": ",
        LogQuote(what), "; exiting with code ", kThreadTopExitCode, "\n");
    std::fwrite(plain.data(), 1, plain.size(), stderr);
  } catch (...) {  // out of memory, say: still say something, still exit
    static_assert(kThreadTopExitCode == 70, "the message below says 70");
    std::fputs(
        "granary: a thread ended by an uncaught exception; exiting "
        "with code 70\n",
        stderr);
  }
  std::fflush(stderr);
  std::_Exit(kThreadTopExitCode);
}

}  // namespace

void RunThreadTop(absl::string_view thread_name,
                  absl::FunctionRef<void()> body) {
  // Named in /proc/PID/task/*/comm, top and debuggers (15 bytes at most).
  const std::string comm(thread_name.substr(0, 15));
  pthread_setname_np(pthread_self(), comm.c_str());
  try {
    body();
  } catch (const std::exception& e) {
    Die(thread_name, TypeName(&typeid(e)), e.what());
  } catch (...) {
#if defined(__GNUG__)
    Die(thread_name, TypeName(abi::__cxa_current_exception_type()),
        "(not a std::exception)");
#else
    Die(thread_name, "unknown", "(not a std::exception)");
#endif
  }
}

}  // namespace granary
