// File: core/address.h
// -----------------------------------------------------------------------------
// HOST:PORT addresses as flags and options spell them.
//
//   std::string host; int port;
//   if (!SplitHostPort("127.0.0.1:0", &host, &port)) { /* malformed */ }
#pragma once

#include <string>

namespace granary {

// Splits HOST:PORT (port 0..65535, host non-empty; "[v6]:port" allowed).
// False when malformed.
bool SplitHostPort(const std::string& address, std::string* host, int* port);

// True when `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool IsLoopbackHost(const std::string& host);

}  // namespace granary
