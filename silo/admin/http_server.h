// File: silo/admin/http_server.h
// -----------------------------------------------------------------------------
// The silo's HTTP endpoint (civetweb): `GET /healthz`, and whatever routes
// the owner adds (the silo's metrics, overview and dashboard: see
// silo/admin/admin_http.h). Only GET and HEAD are served; a request with a body
// larger than kMaxBodyBytes gets 413, another method 405, an unknown path
// 404.
//
//   HttpServer http("127.0.0.1:0");
//   http.Handle("/metrics", [&](const HttpRequest&) {
//     return HttpResponse{200, "text/plain; version=0.0.4", registry.Render()};
//   });
//   GRANARY_RETURN_IF_ERROR(http.Start());
//   http.address();  // 127.0.0.1:<bound port>
//
// Threading: Handle and Start/Stop from one thread, before/after serving;
// handlers run on civetweb's threads, concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

struct mg_context;
struct mg_connection;

namespace granary::silo {

struct HttpRequest {
  std::string path;
  std::string query;  // after '?', undecoded
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpServer {
 public:
  // Request bodies above this size are refused (413); nothing here takes one.
  static constexpr long long kMaxBodyBytes = 16 * 1024;

  // Each connection holds one of `threads` workers while civetweb reads its
  // request; a client that does not send a whole request within
  // `request_timeout_ms` is dropped. So slow clients hold at most
  // threads - 1 workers for that long, and cannot starve /healthz unless
  // there are more of them at once (then a probe waits at most the timeout
  // for each batch of them ahead of it).
  static constexpr int kDefaultThreads = 32;
  static constexpr int kDefaultRequestTimeoutMs = 2000;

  // `address` is HOST:PORT; port 0 picks a free port.
  explicit HttpServer(std::string address, int threads = kDefaultThreads,
                      int request_timeout_ms = kDefaultRequestTimeoutMs);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves `path` (exact match) with `handler`. Before Start.
  void Handle(std::string path, HttpHandler handler);

  // Every path but /healthz, /readyz and / (the dashboard's static page,
  // which sends the token with its own requests) then needs
  // `Authorization: Bearer TOKEN`;
  // without it (or with another) the answer is 401, counted in `refused`
  // (which must outlive the server). Before Start.
  void RequireToken(std::string token, std::atomic<int64_t>* refused) {
    RequireToken([token = std::move(token)] { return token; }, refused);
  }
  // The same, with the token `token` answers for each request (a file read
  // again when it changes: rpc::ReloadingToken), thread-safe.
  void RequireToken(std::function<std::string()> token,
                    std::atomic<int64_t>* refused) {
    token_ = std::move(token);
    refused_ = refused;
  }

  // Host names a request's Host header may name besides IP addresses and
  // localhost; any other name is refused 403, so a web page whose DNS name
  // was rebound to this address (DNS rebinding) cannot read it through a
  // browser. A request without a Host header (HTTP/1.0) is served. Before
  // Start.
  void AllowHosts(std::vector<std::string> names);
  // Whether a request with Host header `host` (HOST[:PORT]; null: none)
  // is served.
  bool HostAllowed(const char* host) const;

  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot bind.
  absl::Status Start();
  // Idempotent; waits for requests in progress.
  void Stop();

  const std::string& address() const { return bound_address_; }
  // The bound port (after Start).
  int port() const { return bound_port_; }

 private:
  static int Dispatch(::mg_connection* conn, void* self);

  const std::string requested_address_;
  const std::string threads_;
  const std::string request_timeout_ms_;
  std::string bound_address_;
  int bound_port_ = 0;
  std::map<std::string, HttpHandler> routes_;
  std::function<std::string()> token_;  // empty: no token needed
  std::atomic<int64_t>* refused_ = nullptr;
  std::vector<std::string> allowed_hosts_;  // lower case
  mg_context* ctx_ = nullptr;
};

}  // namespace granary::silo
