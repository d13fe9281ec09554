#include "silo/http_server.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "civetweb.h"
#include "core/address.h"

namespace granary::silo {
namespace {

int HandleRequest(mg_connection* conn, void*) {
  const mg_request_info* info = mg_get_request_info(conn);
  const char* uri = info->local_uri != nullptr ? info->local_uri : "";
  if (std::strcmp(uri, "/healthz") == 0 &&
      std::strcmp(info->request_method, "GET") == 0) {
    mg_send_http_ok(conn, "text/plain; charset=utf-8", 3);
    mg_write(conn, "ok\n", 3);
    return 200;
  }
  mg_send_http_error(conn, 404, "no such path: %s\n", uri);
  return 404;
}

}  // namespace

HttpServer::HttpServer(std::string address)
    : requested_address_(std::move(address)) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  if (ctx_ != nullptr) return absl::FailedPreconditionError("already started");
  std::string host;
  int port = 0;
  if (!SplitHostPort(requested_address_, &host, &port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "http address '", requested_address_, "' is not HOST:PORT"));
  }
  mg_init_library(0);
  const char* options[] = {"listening_ports", requested_address_.c_str(),
                           "num_threads",     "2",
                           "request_timeout_ms", "10000",
                           nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  ctx_ = mg_start(&callbacks, nullptr, options);
  if (ctx_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("http endpoint could not listen on ", requested_address_));
  }
  mg_set_request_handler(ctx_, "/", &HandleRequest, nullptr);
  mg_server_port ports[4];
  const int n = mg_get_server_ports(ctx_, 4, ports);
  if (n < 1 || ports[0].port <= 0) {
    Stop();
    return absl::UnavailableError("http endpoint reported no bound port");
  }
  bound_address_ = absl::StrCat(host, ":", ports[0].port);
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (ctx_ == nullptr) return;
  mg_stop(ctx_);
  ctx_ = nullptr;
}

}  // namespace granary::silo
