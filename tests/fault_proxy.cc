#include "tests/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <fstream>
#include <random>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace granary::testing {

// Both directions of one proxied connection; the sockets close with the
// last of its two pumps.
struct FaultProxy::Conn {
  int client = -1;
  int upstream = -1;
  ~Conn() {
    if (client >= 0) close(client);
    if (upstream >= 0) close(upstream);
  }
};

namespace {

// Waits up to 100 ms for `fd` to be readable.
bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 100) > 0;
}

// False when the peer is gone, or `stop` is set while it does not read.
bool WriteAll(int fd, const char* data, size_t n,
              const std::atomic<bool>& stop) {
  while (n > 0) {
    const ssize_t w = send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (stop.load()) return false;
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

absl::StatusOr<sockaddr_in> Parse(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535 ||
      inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is not IPv4 HOST:PORT"));
  }
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

}  // namespace

namespace {

// Binds a socket to 127.0.0.1:`port` (0: any) and closes it; the port bound,
// or 0 when it could not be.
int BindAndRelease(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(a);
  int bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    bound = ntohs(a.sin_port);
  }
  close(fd);
  return bound;
}

}  // namespace

int FreePort() { return BindAndRelease(0); }

int FreeFixedPort() {
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  if (low < 12000) return FreePort();
  std::random_device seed;
  std::mt19937 gen(seed());
  std::uniform_int_distribution<int> pick(low - 10000, low - 1);
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (const int port = BindAndRelease(pick(gen)); port != 0) return port;
  }
  return 0;
}

FaultProxy::~FaultProxy() {
  stop_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
  if (listener_ >= 0) close(listener_);
}

absl::Status FaultProxy::Start() {
  absl::StatusOr<sockaddr_in> upstream = Parse(target_);
  if (!upstream.ok()) return upstream.status();
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (listener_ < 0 ||
      bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(listener_, 64) != 0 ||
      getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return absl::InternalError(
        absl::StrCat("proxy cannot listen: errno ", errno));
  }
  address_ = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  acceptor_ = std::thread([this] { Accept(); });
  return absl::OkStatus();
}

void FaultProxy::Spawn(std::thread t) {
  MutexLock lock(&mu_);
  threads_.push_back(std::move(t));
}

void FaultProxy::Accept() {
  const sockaddr_in upstream = *Parse(target_);
  while (!stop_.load()) {
    if (!Readable(listener_)) continue;
    const int fd = accept(listener_, nullptr, nullptr);
    if (fd < 0) continue;
    if (cut_.load()) {
      Spawn(std::thread([this, fd] { Sink(fd); }));
      continue;
    }
    auto conn = std::make_shared<Conn>();
    conn->client = fd;
    conn->upstream = socket(AF_INET, SOCK_STREAM, 0);
    if (conn->upstream < 0 ||
        connect(conn->upstream, reinterpret_cast<const sockaddr*>(&upstream),
                sizeof(upstream)) != 0) {
      continue;  // the silo is not there: the client sees the close
    }
    Spawn(std::thread([this, conn] { Pump(conn, /*downstream=*/false); }));
    Spawn(std::thread([this, conn] { Pump(conn, /*downstream=*/true); }));
  }
}

void FaultProxy::Pump(std::shared_ptr<Conn> conn, bool downstream) {
  const int from = downstream ? conn->upstream : conn->client;
  const int to = downstream ? conn->client : conn->upstream;
  // Bytes read and not yet due (SetDelay), oldest first.
  std::deque<std::pair<absl::Time, std::string>> line;
  bool lost = false;  // bytes were dropped: the stream is broken
  char buf[16384];
  while (!stop_.load()) {
    if (cut_.load()) {
      for (const auto& chunk : line) dropped_.fetch_add(chunk.second.size());
      if (!line.empty()) lost = true;
      line.clear();
    } else if (lost) {
      break;  // healed: a broken stream is closed, not resumed
    }
    const absl::Time now = absl::Now();
    bool failed = false;
    while (!line.empty() && line.front().first <= now) {
      if (!WriteAll(to, line.front().second.data(), line.front().second.size(),
                    stop_)) {
        failed = true;
        break;
      }
      line.pop_front();
    }
    if (failed) break;
    int wait_ms = 100;
    if (!line.empty()) {
      wait_ms = static_cast<int>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(line.front().first - now) + 1, 0, 100));
    }
    pollfd p{from, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) continue;
    const ssize_t n = recv(from, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // The sender closed: deliver what is due, then pass the close on
      // (unless cut: a black hole never closes).
      while (!line.empty() && !cut_.load() && !stop_.load()) {
        absl::SleepFor(
            std::max(absl::ZeroDuration(), line.front().first - absl::Now()));
        if (!WriteAll(to, line.front().second.data(),
                      line.front().second.size(), stop_)) {
          break;
        }
        line.pop_front();
      }
      break;
    }
    if (cut_.load()) {
      dropped_.fetch_add(static_cast<uint64_t>(n));
      lost = true;
      continue;
    }
    const int64_t delay_ns = delay_ns_.load();
    if (delay_ns > 0) delayed_.fetch_add(static_cast<uint64_t>(n));
    line.emplace_back(now + absl::Nanoseconds(delay_ns),
                      std::string(buf, static_cast<size_t>(n)));
  }
  while (cut_.load() && !stop_.load()) absl::SleepFor(absl::Milliseconds(100));
  shutdown(from, SHUT_RDWR);
  shutdown(to, SHUT_RDWR);
}

void FaultProxy::Sink(int fd) {
  // Until the cut heals: then closed, so its client reconnects.
  char buf[16384];
  while (!stop_.load() && cut_.load()) {
    if (!Readable(fd)) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    dropped_.fetch_add(static_cast<uint64_t>(n));
  }
  close(fd);
}

}  // namespace granary::testing
