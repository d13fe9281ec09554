// File: silo/http_server.h
// -----------------------------------------------------------------------------
// The silo's HTTP endpoint (civetweb). It answers `GET /healthz` with 200;
// every other path is 404. Metrics and the dashboard are served here too once
// they exist.
//
//   HttpServer http("127.0.0.1:0");
//   GRANARY_RETURN_IF_ERROR(http.Start());
//   http.address();  // 127.0.0.1:<bound port>
//
// Threading: Start/Stop from one thread; civetweb's threads serve requests.
#pragma once

#include <string>

#include "absl/status/status.h"

struct mg_context;

namespace granary::silo {

class HttpServer {
 public:
  // `address` is HOST:PORT; port 0 picks a free port.
  explicit HttpServer(std::string address);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot bind.
  absl::Status Start();
  // Idempotent; waits for requests in progress.
  void Stop();

  const std::string& address() const { return bound_address_; }

 private:
  const std::string requested_address_;
  std::string bound_address_;
  mg_context* ctx_ = nullptr;
};

}  // namespace granary::silo
