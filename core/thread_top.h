// File: core/thread_top.h
// -----------------------------------------------------------------------------
// The last-resort handler at the top of every thread the runtime starts. An
// exception that escapes a thread's body is a bug (errors are statuses; grain
// exceptions are caught at the turn boundary), and the process cannot go on
// safely: whatever the thread owned (a worker slot, the timer loop, the
// storage writer) is gone. So RunThreadTop() logs which thread and which
// exception at kError, writes one plain line to stderr as well, and ends the
// process with exit code 70 (EX_SOFTWARE from <sysexits.h>) through
// std::_Exit: no static destructors or atexit handlers run while the other
// threads still use what they would tear down, and stdout is not flushed.
// A supervisor sees a distinct exit code instead of a silent
// std::terminate.
//
//   thread_ = std::thread(
//       [this] { RunThreadTop("timer_queue", [this] { Loop(); }); });
//   -> ... E thread=timer_queue exception=std::runtime_error what=boom
//      uncaught exception at the top of a thread; exiting with code 70
//   -> granary: thread timer_queue ended by an uncaught exception
//      std::runtime_error: boom; exiting with code 70
//
// An exception thrown through a noexcept function never gets here: the
// runtime calls std::terminate at that frame.
#pragma once

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace granary {

// The exit code of a process ended by RunThreadTop (EX_SOFTWARE).
inline constexpr int kThreadTopExitCode = 70;

// Names the calling thread `thread_name` (its first 15 bytes: what
// /proc/PID/task/*/comm shows) and runs `body`; if it throws, logs
// `thread_name` and the exception and ends the process with kThreadTopExitCode.
// Returns when `body` returns.
void RunThreadTop(absl::string_view thread_name,
                  absl::FunctionRef<void()> body);

}  // namespace granary
