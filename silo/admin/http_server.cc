#include "silo/admin/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "civetweb.h"
#include "core/address.h"

namespace granary::silo {
namespace {

// Opens and at once closes a TCP connection to `host`:`port` (a wildcard
// host: this machine), as a nudge to whoever polls that listener.
void Nudge(const std::string& host, int port) {
  std::string to = host;
  if (to.empty() || to == "0.0.0.0") to = "127.0.0.1";
  if (to == "::" || to == "[::]") to = "::1";
  if (to.size() > 2 && to.front() == '[' && to.back() == ']') {
    to = to.substr(1, to.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(to.c_str(), service.c_str(), &hints, &found) != 0) return;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const bool connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
    if (connected) break;
  }
  freeaddrinfo(found);
}

void Send(mg_connection* conn, const HttpResponse& r, bool head) {
  const char* reason = mg_get_response_code_text(conn, r.status);
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
            "%s%sConnection: close\r\n\r\n",
            r.status, reason, r.content_type.c_str(), r.body.size(),
            r.status == 405 ? "Allow: GET, HEAD\r\n" : "",
            r.status == 401 ? "WWW-Authenticate: Bearer\r\n" : "");
  if (!head && !r.body.empty()) mg_write(conn, r.body.data(), r.body.size());
}

// Whether `header` is "Bearer <token>", compared in time that does not
// depend on where a wrong token differs.
bool BearerMatches(const char* header, const std::string& token) {
  if (header == nullptr) return false;
  std::string_view value(header);
  constexpr std::string_view kScheme = "Bearer ";
  if (value.size() < kScheme.size() ||
      strncasecmp(value.data(), kScheme.data(), kScheme.size()) != 0) {
    return false;
  }
  value.remove_prefix(kScheme.size());
  unsigned char diff = value.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < value.size(); ++i) {
    diff |= static_cast<unsigned char>(value[i]) ^
            static_cast<unsigned char>(token[i % token.size()]);
  }
  return diff == 0;
}

}  // namespace

HttpServer::HttpServer(std::string address, int threads, int request_timeout_ms)
    : requested_address_(std::move(address)),
      threads_(absl::StrCat(threads)),
      request_timeout_ms_(absl::StrCat(request_timeout_ms)) {
  routes_["/healthz"] = [](const HttpRequest&) {
    return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
  };
}

namespace {

// What is served without a token: the probes a supervisor calls (they
// tell nothing else), and the dashboard's page, static HTML that holds no
// data (it asks for the token and sends it with its own requests).
bool IsOpenPath(std::string_view path) {
  return path == "/healthz" || path == "/readyz" || path == "/";
}

}  // namespace

HttpServer::~HttpServer() { Stop(); }

void HttpServer::AllowHosts(std::vector<std::string> names) {
  for (std::string& n : names)
    allowed_hosts_.push_back(absl::AsciiStrToLower(n));
}

bool HttpServer::HostAllowed(const char* header) const {
  if (header == nullptr) return true;  // HTTP/1.0: no browser sends that
  std::string_view host(header);
  if (!host.empty() && host.front() == '[') {  // [v6]:port
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    host = host.substr(1, close - 1);
  } else if (const size_t colon = host.find(':');
             colon != std::string_view::npos) {
    if (host.find(':', colon + 1) != std::string_view::npos) return false;
    host = host.substr(0, colon);
  }
  const std::string name(host);
  in6_addr v6;
  in_addr v4;
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1 ||
      inet_pton(AF_INET6, name.c_str(), &v6) == 1) {
    return true;  // an address: no DNS name to rebind
  }
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "localhost") return true;
  for (const std::string& allowed : allowed_hosts_) {
    if (lower == allowed) return true;
  }
  return false;
}

void HttpServer::Handle(std::string path, HttpHandler handler) {
  routes_[std::move(path)] = std::move(handler);
}

int HttpServer::Dispatch(mg_connection* conn, void* self_ptr) {
  auto* self = static_cast<HttpServer*>(self_ptr);
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string method = info->request_method ? info->request_method : "";
  const bool head = method == "HEAD";
  HttpResponse response;
  if (info->content_length > kMaxBodyBytes) {
    response = {
        413, "text/plain; charset=utf-8",
        absl::StrCat("request body of ", info->content_length,
                     " bytes is over the limit of ", kMaxBodyBytes, "\n")};
  } else if (!self->HostAllowed(mg_get_header(conn, "Host"))) {
    response = {403, "text/plain; charset=utf-8",
                "the Host header names no address of this silo (allow "
                "host names with --http_hosts)\n"};
  } else if (method != "GET" && !head) {
    response = {405, "text/plain; charset=utf-8",
                absl::StrCat("method ", method, " is not allowed; use GET\n")};
  } else if (self->token_ &&
             !IsOpenPath(info->local_uri != nullptr ? info->local_uri : "") &&
             !BearerMatches(mg_get_header(conn, "Authorization"),
                            self->token_())) {
    if (self->refused_ != nullptr) {
      self->refused_->fetch_add(1, std::memory_order_relaxed);
    }
    response = {401, "text/plain; charset=utf-8",
                "a valid bearer token is required "
                "(Authorization: Bearer TOKEN)\n"};
  } else {
    HttpRequest request;
    request.path = info->local_uri != nullptr ? info->local_uri : "";
    request.query = info->query_string != nullptr ? info->query_string : "";
    auto it = self->routes_.find(request.path);
    if (it == self->routes_.end()) {
      response = {404, "text/plain; charset=utf-8",
                  absl::StrCat("no such path: ", request.path, "\n")};
    } else {
      // A handler's exception must not unwind through civetweb's C code.
      try {
        response = it->second(request);
      } catch (const std::exception& e) {
        response = {500, "text/plain; charset=utf-8",
                    absl::StrCat("internal error: ", e.what(), "\n")};
      }
    }
  }
  Send(conn, response, head);
  return response.status;
}

absl::Status HttpServer::Start() {
  if (ctx_ != nullptr) return absl::FailedPreconditionError("already started");
  std::string host;
  int port = 0;
  if (!SplitHostPort(requested_address_, &host, &port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "http address '", requested_address_, "' is not HOST:PORT"));
  }
  mg_init_library(0);
  // Accepted connections wait for a worker in a queue of `threads`; past
  // that, in the kernel's backlog.
  const char* options[] = {
      "listening_ports",    requested_address_.c_str(),  "num_threads",
      threads_.c_str(),     "connection_queue",          threads_.c_str(),
      "request_timeout_ms", request_timeout_ms_.c_str(), nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  ctx_ = mg_start(&callbacks, nullptr, options);
  if (ctx_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("http endpoint could not listen on ", requested_address_));
  }
  mg_set_request_handler(ctx_, "/", &HttpServer::Dispatch, this);
  mg_server_port ports[4];
  const int n = mg_get_server_ports(ctx_, 4, ports);
  if (n < 1 || ports[0].port <= 0) {
    Stop();
    return absl::UnavailableError("http endpoint reported no bound port");
  }
  bound_address_ = absl::StrCat(host, ":", ports[0].port);
  bound_port_ = ports[0].port;
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (ctx_ == nullptr) return;
  // civetweb's accept loop looks at its stop flag between polls of up to
  // 2 s, so mg_stop alone takes that long on an idle port. A connection
  // wakes the poll: the loop sees the flag and stops in milliseconds. (One
  // that arrives before the flag is set is an empty request, closed at once
  // by the worker that takes it.)
  std::string host;
  int port = 0;
  (void)SplitHostPort(requested_address_, &host, &port);
  std::atomic<bool> stopped{false};
  std::thread waker([&] {
    while (!stopped.load()) {
      Nudge(host, bound_port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  mg_stop(ctx_);
  stopped = true;
  waker.join();
  ctx_ = nullptr;
}

}  // namespace granary::silo
