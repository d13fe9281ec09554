// Fuzzes the silo's admin HTTP endpoint: the input is sent as a raw request
// to HttpServer (silo/admin/http_server.h, civetweb) serving AdminHttp's
// routes (/metrics, /api/overview, the dashboard) and /healthz for a silo
// hosting the example grains. civetweb parses the request line, headers,
// path and query; HttpServer's dispatch checks the method, the body size
// and the bearer token, and routes by path.
//
// The request handling is reachable only through civetweb's connection, so
// two servers start once on 127.0.0.1 port 0 (one open, one requiring the
// token "fuzz-token") and every input goes to each over a fresh loopback
// connection: written, half-closed, and the answer read until the server
// closes (bounded). Checked: an answer, when there is one, is an HTTP
// response.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/address.h"
#include "fuzz/fuzz_support.h"
#include "silo/admin/admin_http.h"
#include "silo/admin/http_server.h"
#include "silo/runtime/runtime.h"

namespace granary::fuzz {
namespace {

// How long one exchange may take.
constexpr absl::Duration kExchangeBound = absl::Seconds(4);

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "admin_http: %s\n", what.c_str());
  std::abort();
}

int open_port = 0;
int token_port = 0;

int StartServer(silo::AdminHttp* admin, const char* token) {
  // Lives for the process, as the silo does.
  auto* http = new silo::HttpServer("127.0.0.1:0", /*threads=*/4,
                                    /*request_timeout_ms=*/2000);
  admin->Register(http);
  if (token != nullptr) http->RequireToken(token, new std::atomic<int64_t>(0));
  if (absl::Status s = http->Start(); !s.ok()) Fail(s.ToString());
  std::string host;
  int port = 0;
  if (!SplitHostPort(http->address(), &host, &port)) Fail(http->address());
  return port;
}

// Waits for `fd` to be ready for `events` until `deadline`; false when the
// deadline passed.
bool WaitFor(int fd, short events, absl::Time deadline) {
  pollfd p{fd, events, 0};
  while (true) {
    const int ms =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms <= 0) return false;
    const int n = poll(&p, 1, ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

void Exchange(int port, const uint8_t* data, size_t size) {
  const absl::Time deadline = absl::Now() + kExchangeBound;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
      errno != EINPROGRESS) {
    Fail(absl::StrCat("connect failed: errno ", errno));
  }
  size_t sent = 0;
  while (sent < size) {
    if (!WaitFor(fd, POLLOUT, deadline)) break;
    const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      break;  // the server answered early and closed
    }
  }
  shutdown(fd, SHUT_WR);
  std::string answer;
  char buffer[16384];
  while (WaitFor(fd, POLLIN, deadline)) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      answer.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      break;
    }
  }
  close(fd);
  // "HTTP/" and not "HTTP/1.": civetweb's own 400 answer repeats the
  // request's protocol token, whatever it was.
  if (!answer.empty() && !absl::StartsWith(answer, "HTTP/")) {
    Fail(absl::StrCat("the answer is not HTTP: ", answer.substr(0, 64)));
  }
}

}  // namespace
}  // namespace granary::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace granary::fuzz;
  QuietLogs();
  auto* admin = new granary::silo::AdminHttp(&ExampleSilo(), "127.0.0.1:1");
  open_port = StartServer(admin, nullptr);
  token_port = StartServer(admin, "fuzz-token");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary::fuzz;
  if (size > kMaxInputBytes) return -1;
  Exchange(open_port, data, size);
  Exchange(token_port, data, size);
  return 0;
}
