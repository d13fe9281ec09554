// File: bench/compare/grpc/server.h
// -----------------------------------------------------------------------------
// The server side of granary-compare-grpc: CompareEcho
// (bench/compare/grpc/compare_echo.proto) on gRPC's callback API, the API
// Granary's gateway serves its Connect stream with
// (silo/gateway/gateway_service.cc). It runs in a helper process, the arm's
// binary started again with a hidden flag (bench/child_process.h), so every
// call crosses a real socket.
//
//   // In the helper: granary-compare-grpc --serve_compare_echo=127.0.0.1:0
//   return ServeCompareEcho("127.0.0.1:0");  // prints READY address=HOST:PORT
//
// The server runs until its stdin reaches end-of-file (the parent closed it
// or died) or SIGTERM / SIGINT arrives, then shuts down.
//
// Threading: the handlers run on gRPC's callback threads; each stream's
// reactor is driven by one callback at a time.
#pragma once

#include <string>

namespace granary::bench::compare {

// The hidden flag that makes the arm's binary serve instead of measure.
inline constexpr char kServeFlag[] = "--serve_compare_echo=";

// Serves CompareEcho on `address` (HOST:PORT; port 0 picks a free one),
// prints `READY address=HOST:PORT` on stdout once listening, and serves until
// told to stop. Returns the process exit status: 0, or 2 when it cannot
// listen.
int ServeCompareEcho(const std::string& address);

}  // namespace granary::bench::compare
