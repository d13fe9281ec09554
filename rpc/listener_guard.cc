#include "rpc/listener_guard.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/log.h"
#include "core/sync.h"

// The sanitizers' own accept4, when a sanitizer runtime is linked in: the
// guard calls it so that the sanitizer still sees every accepted socket.
extern "C" int __interceptor_accept4(int, struct sockaddr*, socklen_t*, int)
    __attribute__((weak));

namespace granary::rpc {
namespace {

// A peer address: an IPv4 address (hi = kIpv4), or an IPv6 /64 (lo = 0).
struct PeerKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const PeerKey& o) const { return hi == o.hi && lo == o.lo; }
  template <typename H>
  friend H AbslHashValue(H h, const PeerKey& k) {
    return H::combine(std::move(h), k.hi, k.lo);
  }
};
constexpr uint64_t kIpv4 = ~uint64_t{0};

PeerKey KeyOf(const sockaddr_storage& a) {
  PeerKey k;
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    k.hi = kIpv4;
    k.lo = ntohl(in.sin_addr.s_addr);
  } else if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    const uint8_t* b = in6.sin6_addr.s6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      k.hi = kIpv4;
      k.lo = (uint64_t{b[12]} << 24) | (uint64_t{b[13]} << 16) |
             (uint64_t{b[14]} << 8) | b[15];
    } else {
      for (int i = 0; i < 8; ++i) k.hi = (k.hi << 8) | b[i];
    }
  }
  return k;
}

struct Conn {
  ino_t inode = 0;
  PeerKey peer;
};

struct Peer {
  absl::flat_hash_set<int> fds;
  int64_t last_sweep_ns = 0;
};

struct Guard {
  ListenerCaps caps;
  absl::flat_hash_map<int, Conn> conns;  // by descriptor
  absl::flat_hash_map<PeerKey, Peer> peers;
  ListenerCounts counts;
  int64_t last_sweep_ns = 0;
};

// A full or one-peer sweep runs at most this often while a cap is reached,
// so a peer knocking at its cap costs one sweep per period, not per accept.
constexpr int64_t kSweepPeriodNs = 20'000'000;
// A peer with at most this many connections is swept on every connection
// past its cap (that many fstat calls): with a small cap, as on the HTTP
// port, a client that opens one connection after another would otherwise
// be refused while the ones it just closed wait for the next sweep.
constexpr size_t kAlwaysSweepPeerBelow = 16;

struct State {
  Mutex mu;
  absl::flat_hash_map<int, Guard> guards ABSL_GUARDED_BY(mu);  // by port
  int spare_fd ABSL_GUARDED_BY(mu) = -1;  // held for shedding at EMFILE
  std::atomic<int> guarded{0};            // guards.size(), read unlocked
};

State& TheState() {
  static State* state = new State;  // never destroyed: accept4 may outlive main
  return *state;
}

int64_t NowNs() { return absl::GetCurrentTimeNanos(); }

int RealAccept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  if (__interceptor_accept4 != nullptr) {
    return __interceptor_accept4(fd, addr, len, flags);
  }
  return static_cast<int>(syscall(SYS_accept4, fd, addr, len, flags));
}

// The port `fd` listens on; 0 when it is not a TCP socket.
int LocalPort(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  if (a.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in&>(a).sin_port);
  }
  if (a.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6&>(a).sin6_port);
  }
  return 0;
}

// True while `fd` still holds the socket accepted as `conn`, and its
// connection is not closed by both ends. A server that answered and shut
// down its side (civetweb's graceful close) keeps the descriptor until it
// reads the client's end: a client that closed counts no more, though the
// descriptor lingers, while one that keeps its side open still counts (it
// may hold a worker).
bool StillOpen(int fd, const Conn& conn) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_ino != conn.inode)
    return false;
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return true;
  switch (info.tcpi_state) {
    case TCP_TIME_WAIT:
    case TCP_CLOSING:
    case TCP_LAST_ACK:
    case TCP_CLOSE:
      return false;
    default:
      return true;
  }
}

void Forget(Guard& g, int fd) {
  auto it = g.conns.find(fd);
  if (it == g.conns.end()) return;
  auto peer = g.peers.find(it->second.peer);
  if (peer != g.peers.end()) {
    peer->second.fds.erase(fd);
    if (peer->second.fds.empty()) g.peers.erase(peer);
  }
  g.conns.erase(it);
}

// Drops the entries whose connections were closed since.
void Sweep(Guard& g, int64_t now) {
  g.last_sweep_ns = now;
  std::vector<int> gone;
  for (const auto& [fd, conn] : g.conns) {
    if (!StillOpen(fd, conn)) gone.push_back(fd);
  }
  for (int fd : gone) Forget(g, fd);
}

void SweepPeer(Guard& g, const PeerKey& key, int64_t now) {
  auto it = g.peers.find(key);
  if (it == g.peers.end()) return;
  it->second.last_sweep_ns = now;
  std::vector<int> gone;
  for (int fd : it->second.fds) {
    auto conn = g.conns.find(fd);
    if (conn == g.conns.end() || !StillOpen(fd, conn->second))
      gone.push_back(fd);
  }
  for (int fd : gone) Forget(g, fd);
}

// Whether `g` takes one more connection from `peer`.
bool HasRoom(Guard& g, const PeerKey& peer, int64_t now) {
  if (static_cast<int64_t>(g.conns.size()) >= g.caps.max_connections &&
      now - g.last_sweep_ns >= kSweepPeriodNs) {
    Sweep(g, now);
  }
  if (static_cast<int64_t>(g.conns.size()) >= g.caps.max_connections) {
    ++g.counts.refused_total;
    return false;
  }
  auto it = g.peers.find(peer);
  if (it != g.peers.end() &&
      static_cast<int64_t>(it->second.fds.size()) >= g.caps.max_per_peer) {
    if (it->second.fds.size() <= kAlwaysSweepPeerBelow ||
        now - it->second.last_sweep_ns >= kSweepPeriodNs) {
      SweepPeer(g, peer, now);
      it = g.peers.find(peer);
    }
    if (it != g.peers.end() &&
        static_cast<int64_t>(it->second.fds.size()) >= g.caps.max_per_peer) {
      ++g.counts.refused_peer;
      return false;
    }
  }
  return true;
}

void Track(Guard& g, int fd, const PeerKey& peer) {
  struct stat st;
  if (fstat(fd, &st) != 0) return;
  Forget(g, fd);  // the descriptor's earlier connection closed, unnoticed
  g.conns[fd] = Conn{st.st_ino, peer};
  g.peers[peer].fds.insert(fd);
}

// At the open-file limit: accepts one waiting connection on the spare
// descriptor and closes it. False when there was none to take, or the
// spare is gone (another thread took the slot).
// Called with s.mu held.
bool ShedOne(State& s, int listen_fd) {
  if (s.spare_fd < 0) return false;
  close(s.spare_fd);
  s.spare_fd = -1;
  int c = RealAccept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (c >= 0) close(c);
  s.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return c >= 0;
}

// `one_shot`: for a caller of accept() whose listening socket may block
// (civetweb's): after a refused connection, EAGAIN instead of waiting for
// the next one, so its loop goes back to polling (and to its stop flag).
int GuardedAccept(State& s, int port, int fd, sockaddr* addr, socklen_t* len,
                  int flags, bool one_shot) {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    int c =
        RealAccept4(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len, flags);
    if (c < 0) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR ||
          err == ECONNABORTED) {
        return -1;
      }
      MutexLock lock(&s.mu);
      auto it = s.guards.find(port);
      if ((err == EMFILE || err == ENFILE) && one_shot && s.spare_fd >= 0) {
        // The HTTP port (accept()): its connection is served on the spare
        // descriptor, so /healthz still answers at the open-file limit;
        // the spare is opened again once a descriptor is free.
        close(s.spare_fd);
        s.spare_fd = -1;
        c = RealAccept4(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                        flags);
        if (c < 0) {
          s.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
          errno = EAGAIN;
          return -1;
        }
        if (it != s.guards.end()) Track(it->second, c, KeyOf(peer));
        if (addr != nullptr && len != nullptr) {
          std::memcpy(addr, &peer, std::min<size_t>(*len, peer_len));
          *len = peer_len;
        }
        return c;
      }
      if (err == EMFILE || err == ENFILE) {
        const bool shed = ShedOne(s, fd);
        if (it != s.guards.end() && shed) ++it->second.counts.shed_fd_limit;
        if (shed && !one_shot) continue;  // the next one, until none waits
        errno = EAGAIN;                   // gRPC waits for the next connection
        return -1;
      }
      if (it != s.guards.end()) ++it->second.counts.accept_errors;
      errno = ECONNABORTED;  // anything else would stop gRPC's listener
      return -1;
    }
    const PeerKey key = KeyOf(peer);
    bool admit = true;
    {
      MutexLock lock(&s.mu);
      if (s.spare_fd < 0) s.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      auto it = s.guards.find(port);
      if (it != s.guards.end()) {
        const int64_t now = NowNs();
        admit = HasRoom(it->second, key, now);
        if (admit) Track(it->second, c, key);
      }
    }
    if (!admit) {
      close(c);
      if (one_shot) {
        errno = EAGAIN;
        return -1;
      }
      continue;
    }
    if (addr != nullptr && len != nullptr) {
      std::memcpy(addr, &peer, std::min<size_t>(*len, peer_len));
      *len = peer_len;
    }
    return c;
  }
}

}  // namespace

absl::Status ValidateListenerCaps(const ListenerCaps& caps) {
  if (caps.max_connections < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_connections must be positive, not ", caps.max_connections));
  }
  if (caps.max_per_peer < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_connections_per_peer must be positive, not ",
                     caps.max_per_peer));
  }
  return absl::OkStatus();
}

ListenerCaps DefaultListenerCaps(int64_t open_file_limit, int listeners) {
  listeners = std::max(1, listeners);
  const int64_t reserve = std::max<int64_t>(256, open_file_limit / 8);
  const int64_t share =
      std::max<int64_t>(16, (open_file_limit - reserve) / listeners);
  ListenerCaps caps;
  caps.max_connections = static_cast<int>(std::min<int64_t>(share, INT32_MAX));
  caps.max_per_peer = static_cast<int>(
      std::max<int64_t>(16, std::min<int64_t>(share / 8, INT32_MAX)));
  return caps;
}

int64_t RaiseOpenFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return -1;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur == RLIM_INFINITY) return INT64_MAX;
  return static_cast<int64_t>(lim.rlim_cur);
}

void GuardListener(int port, const ListenerCaps& caps) {
  State& s = TheState();
  MutexLock lock(&s.mu);
  if (s.spare_fd < 0) s.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  Guard& g = s.guards[port];
  g.caps = caps;
  s.guarded.store(static_cast<int>(s.guards.size()), std::memory_order_release);
}

void UnguardListener(int port) {
  State& s = TheState();
  MutexLock lock(&s.mu);
  s.guards.erase(port);
  s.guarded.store(static_cast<int>(s.guards.size()), std::memory_order_release);
}

ListenerCounts GuardedListenerCounts(int port) {
  State& s = TheState();
  MutexLock lock(&s.mu);
  auto it = s.guards.find(port);
  if (it == s.guards.end()) return {};
  Guard& g = it->second;
  const int64_t now = NowNs();
  if (now - g.last_sweep_ns >= kSweepPeriodNs) Sweep(g, now);
  ListenerCounts counts = g.counts;
  counts.open = static_cast<int64_t>(g.conns.size());
  return counts;
}

bool ListenerGuardActive() {
  using Accept4 = int (*)(int, sockaddr*, socklen_t*, int);
  using Accept = int (*)(int, sockaddr*, socklen_t*);
  void* found4 = dlsym(RTLD_DEFAULT, "accept4");
  void* found = dlsym(RTLD_DEFAULT, "accept");
  return found4 != nullptr && found != nullptr &&
         reinterpret_cast<Accept4>(found4) ==
             static_cast<Accept4>(&::accept4) &&
         reinterpret_cast<Accept>(found) == static_cast<Accept>(&::accept);
}

absl::Status ProbeListener(const std::string& address, absl::Duration timeout) {
  std::string host, port;
  if (!address.empty() && address[0] == '[') {
    const size_t close_bracket = address.find(']');
    if (close_bracket == std::string::npos ||
        close_bracket + 1 >= address.size() ||
        address[close_bracket + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("bad address '", address, "'"));
    }
    host = address.substr(1, close_bracket - 1);
    port = address.substr(close_bracket + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad address '", address, "'"));
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number <= 0 ||
      port_number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad port in '", address, "'"));
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve '", address, "'"));
  }
  const int fd =
      socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int err = errno;
    freeaddrinfo(found);
    // This process is out of descriptors: that says nothing of the listener.
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot probe ", address, ": socket: ", std::strerror(err)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  auto wait = [&](short events) -> int {
    pollfd p{fd, events, 0};
    for (;;) {
      const int64_t ms = std::max<int64_t>(
          0, absl::ToInt64Milliseconds(deadline - absl::Now()));
      const int n =
          poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, INT32_MAX)));
      if (n < 0 && errno == EINTR) continue;
      return n > 0 ? p.revents : 0;
    }
  };
  absl::Status status = absl::OkStatus();
  if (connect(fd, found->ai_addr, found->ai_addrlen) != 0 &&
      errno != EINPROGRESS) {
    status = absl::UnavailableError(absl::StrCat("cannot connect to ", address,
                                                 ": ", std::strerror(errno)));
  }
  freeaddrinfo(found);
  if (status.ok()) {
    int err = 0;
    socklen_t err_len = sizeof(err);
    if ((wait(POLLOUT) & (POLLOUT | POLLERR | POLLHUP)) == 0) {
      status = absl::UnavailableError(
          absl::StrCat("no TCP connection to ", address, " within ",
                       absl::FormatDuration(timeout)));
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0 ||
               err != 0) {
      status = absl::UnavailableError(absl::StrCat(
          "cannot connect to ", address, ": ", std::strerror(err)));
    }
  }
  if (status.ok()) {
    // The HTTP/2 client preface and an empty SETTINGS frame.
    static constexpr char kPreface[] =
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    (void)send(fd, kPreface, sizeof(kPreface) - 1, MSG_NOSIGNAL);
    if ((wait(POLLIN) & (POLLIN | POLLERR | POLLHUP | POLLRDHUP)) == 0) {
      status = absl::UnavailableError(absl::StrCat(
          "the listener at ", address,
          " did not answer a new connection within ",
          absl::FormatDuration(timeout), ": it no longer accepts"));
    }
  }
  close(fd);
  return status;
}

}  // namespace granary::rpc

namespace granary::rpc {
namespace {

int Accept(int fd, sockaddr* addr, socklen_t* len, int flags, bool one_shot) {
  State& s = TheState();
  if (s.guarded.load(std::memory_order_acquire) > 0) {
    const int port = LocalPort(fd);
    bool guarded = false;
    if (port != 0) {
      MutexLock lock(&s.mu);
      guarded = s.guards.contains(port);
    }
    if (guarded) return GuardedAccept(s, port, fd, addr, len, flags, one_shot);
  }
  return RealAccept4(fd, addr, len, flags);
}

}  // namespace
}  // namespace granary::rpc

// The process's accept4 and accept (see listener_guard.h): the executable
// exports them, so gRPC's listeners (accept4) and civetweb's (accept) call
// them instead of libc's.
extern "C" int accept4(int fd, struct sockaddr* addr, socklen_t* len,
                       int flags) {
  return granary::rpc::Accept(fd, addr, len, flags, /*one_shot=*/false);
}

extern "C" int accept(int fd, struct sockaddr* addr, socklen_t* len) {
  return granary::rpc::Accept(fd, addr, len, 0, /*one_shot=*/true);
}
