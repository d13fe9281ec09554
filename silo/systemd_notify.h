// File: silo/systemd_notify.h
// -----------------------------------------------------------------------------
// The systemd notification protocol (sd_notify(3)): when the process runs
// under a unit with Type=notify, systemd names a datagram socket in
// $NOTIFY_SOCKET and waits for "READY=1" before it counts the service as
// started; "STOPPING=1" tells it the service is shutting down. Without
// $NOTIFY_SOCKET every call does nothing.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace granary::silo {

// Sends `state` (newline-separated "KEY=VALUE" lines) to $NOTIFY_SOCKET.
// OK when sent or when there is no such socket; UNAVAILABLE naming the
// socket when it cannot be reached.
absl::Status NotifySystemd(const std::string& state);

}  // namespace granary::silo
