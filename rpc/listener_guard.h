// File: rpc/listener_guard.h
// -----------------------------------------------------------------------------
// Keeps a gRPC listener alive under a connection flood, and caps what one
// peer or all of them can hold open on it.
//
//   rpc::RaiseOpenFileLimit();                       // soft -> hard, at start
//   rpc::GuardListener(port, rpc::DefaultListenerCaps(limit, 2));
//   ...
//   rpc::ProbeListener("127.0.0.1:" + port, absl::Seconds(2));  // accepts?
//
// Why: gRPC 1.51 (Debian 12's) stops a listener for good on the first
// accept4 error other than EAGAIN, EINTR or ECONNABORTED. One EMFILE, when
// a flood of idle connections has used up the open-file limit, leaves the
// port bound, the kernel completing handshakes into its backlog, and no
// call ever served again. This file defines accept4 and accept for the
// process (the executable exports them, so gRPC's calls, and civetweb's for
// the HTTP port, come here first) and, for the ports it guards:
//   - no error but EAGAIN, EINTR or ECONNABORTED reaches gRPC: at the
//     open-file limit it accepts each waiting connection on a spare
//     descriptor kept for that and closes it at once (the client sees its
//     connection closed, UNAVAILABLE, and retries), and other errors are
//     reported as ECONNABORTED, after which gRPC waits for the next one;
//   - a connection past max_connections open on the listener, or past
//     max_per_peer from one peer address (an IPv4 address, or an IPv6 /64),
//     is closed as soon as it is accepted.
// A caller of accept() (civetweb's HTTP port) gets EAGAIN after a refused
// connection rather than a wait for the next one, and at the open-file
// limit gets its connection on the spare descriptor (so /healthz answers
// there), which is opened again once a descriptor is free.
// Connections are counted from accept to close: an entry whose descriptor
// no longer holds the same socket (fstat's inode) is dropped when a cap is
// reached, before refusing. Ports not guarded see the plain accept4.
//
// Threading: everything is thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace granary::rpc {

struct ListenerCaps {
  // Connections open at once on the listener.
  int max_connections = 1 << 14;
  // Of them, from one peer address (IPv4 address, IPv6 /64).
  int max_per_peer = 1 << 11;
};

// INVALID_ARGUMENT naming the flag out of range.
absl::Status ValidateListenerCaps(const ListenerCaps& caps);

// Caps for `listeners` listeners in a process whose open-file limit is
// `open_file_limit`: a reserve is kept for everything else (storage files,
// outgoing channels, HTTP) of max(256, limit / 8) descriptors; each
// listener may hold an equal share of the rest, and one peer an eighth of
// a listener's share (at least 16).
ListenerCaps DefaultListenerCaps(int64_t open_file_limit, int listeners);

// Raises this process's soft open-file limit to its hard limit; returns the
// soft limit now in force.
int64_t RaiseOpenFileLimit();

// Starts guarding the listening socket bound to TCP `port` (any address)
// with `caps`; a second call for a port replaces its caps.
void GuardListener(int port, const ListenerCaps& caps);
// Stops guarding `port` (its server stopped).
void UnguardListener(int port);

struct ListenerCounts {
  int64_t open = 0;           // connections open now
  int64_t refused_total = 0;  // closed at once: max_connections reached
  int64_t refused_peer = 0;   // closed at once: max_per_peer reached
  int64_t shed_fd_limit = 0;  // closed at once: the open-file limit reached
  int64_t accept_errors = 0;  // other accept errors, kept from gRPC
};
// The counts of a guarded port (zeros for another).
ListenerCounts GuardedListenerCounts(int port);

// True when this process's accept4 and accept are the guard's (the
// executable exports them); false means gRPC and civetweb call libc's,
// unguarded.
bool ListenerGuardActive();

// OK when the listener at `address` (host:port) accepts: a TCP connection
// to it, sent the HTTP/2 client preface, gets any answer (bytes, or the
// connection closed) within `timeout`. A TLS listener answers the preface
// with an alert or a close, a refusing guard with a close. UNAVAILABLE when
// the connection is refused, or nothing comes back (a listener that no
// longer accepts leaves connections in the kernel's backlog);
// RESOURCE_EXHAUSTED when this process cannot open a socket to probe with
// (which says nothing of the listener).
absl::Status ProbeListener(const std::string& address, absl::Duration timeout);

}  // namespace granary::rpc
