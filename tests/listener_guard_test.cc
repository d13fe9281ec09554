// The listener guard (rpc/listener_guard.h): caps sized from the open-file
// limit, per-peer and per-listener caps on a real gRPC server, and the
// probe that tells a listener that accepts from one that no longer does.
// The flood itself, at a small open-file limit, is connection_flood_test.py.
#include "rpc/listener_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "silo/listener_watch.h"

namespace granary::rpc {
namespace {

// A TCP connection from `source` (an address on lo) to 127.0.0.1:port;
// -1 when it cannot be made.
int ConnectFrom(const char* source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A socket listening on 127.0.0.1 at a free port (set in `port`) that
// nothing accepts on; -1 when it cannot be made.
int ListenOnLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

// ListenOnLoopback, guarded with room for 100 connections and
// `max_per_peer` from one peer; -1 when it cannot listen.
int GuardedLoopbackListener(int max_per_peer, int* port) {
  const int fd = ListenOnLoopback(port);
  if (fd < 0) return -1;
  ListenerCaps caps;
  caps.max_connections = 100;
  caps.max_per_peer = max_per_peer;
  GuardListener(*port, caps);
  return fd;
}

// True when the server closed `fd` within `timeout` (EOF or reset).
bool ClosedByServer(int fd, absl::Duration timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) {
    return false;
  }
  char byte;
  return recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
}

struct Server {
  std::unique_ptr<grpc::CallbackGenericService> service;  // outlives server
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// Answers every call UNIMPLEMENTED (a server needs a service).
class NoMethods final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    class Refuse final : public grpc::ServerGenericBidiReactor {
     public:
      Refuse() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
      void OnDone() override { delete this; }
    };
    return new Refuse;
  }
};

Server StartServer() {
  Server s;
  s.service = std::make_unique<NoMethods>();
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(s.service.get());
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &s.port);
  s.server = builder.BuildAndStart();
  return s;
}

// A fresh channel (its own connection) that became READY: the server
// accepted it and finished the HTTP/2 handshake.
bool Connects(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel =
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                grpc::InsecureChannelCredentials(), args);
  return channel->WaitForConnected(
      absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
}

TEST(ListenerGuardTest, TheGuardsAccept4IsTheProcesss) {
  EXPECT_TRUE(ListenerGuardActive());
}

TEST(ListenerGuardTest, DefaultCapsKeepAReserveBelowTheOpenFileLimit) {
  const ListenerCaps small = DefaultListenerCaps(1024, 2);
  EXPECT_EQ(small.max_connections, (1024 - 256) / 2);
  EXPECT_EQ(small.max_per_peer, (1024 - 256) / 2 / 8);
  EXPECT_LT(2 * small.max_connections, 1024);
  const ListenerCaps large = DefaultListenerCaps(1 << 20, 2);
  EXPECT_EQ(large.max_connections, ((1 << 20) - (1 << 17)) / 2);
  EXPECT_LT(2 * int64_t{large.max_connections}, 1 << 20);
  const ListenerCaps tiny = DefaultListenerCaps(64, 2);  // floors
  EXPECT_EQ(tiny.max_connections, 16);
  EXPECT_EQ(tiny.max_per_peer, 16);
}

TEST(ListenerGuardTest, CapsOutOfRangeAreRefused) {
  ListenerCaps caps;
  caps.max_connections = 0;
  absl::Status s = ValidateListenerCaps(caps);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--max_connections"), std::string::npos);
  caps = ListenerCaps();
  caps.max_per_peer = -3;
  s = ValidateListenerCaps(caps);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--max_connections_per_peer"), std::string::npos);
  EXPECT_TRUE(ValidateListenerCaps(ListenerCaps()).ok());
}

TEST(ListenerGuardTest, OnePeerPastItsCapIsClosedAndOthersAreServed) {
  Server s = StartServer();
  ASSERT_NE(s.server, nullptr);
  ListenerCaps caps;
  caps.max_connections = 100;
  caps.max_per_peer = 4;
  GuardListener(s.port, caps);
  std::vector<int> flood;
  for (int i = 0; i < 12; ++i) {
    const int fd = ConnectFrom("127.0.0.2", s.port);
    ASSERT_GE(fd, 0);
    flood.push_back(fd);
  }
  int closed = 0;
  for (int fd : flood)
    closed += ClosedByServer(fd, absl::Milliseconds(500)) ? 1 : 0;
  EXPECT_EQ(closed, 8);           // the first four are kept
  EXPECT_TRUE(Connects(s.port));  // another peer (127.0.0.1) is served
  ListenerCounts counts = GuardedListenerCounts(s.port);
  EXPECT_EQ(counts.refused_peer, 8);
  EXPECT_GE(counts.open,
            4);  // and the channel's, until the server sees it close
  EXPECT_LE(counts.open, 5);
  // Closed connections leave the count: the peer may connect again.
  for (int fd : flood) close(fd);
  absl::SleepFor(absl::Milliseconds(100));
  const int again = ConnectFrom("127.0.0.2", s.port);
  ASSERT_GE(again, 0);
  EXPECT_FALSE(ClosedByServer(again, absl::Milliseconds(300)));
  close(again);
  UnguardListener(s.port);
  s.server->Shutdown();
}

// civetweb's HTTP port calls accept() on a listening socket that may block:
// a connection past its peer's cap is closed and accept() answers EAGAIN at
// once, rather than waiting for the next connection.
TEST(ListenerGuardTest, AcceptRefusesPastThePeerCapWithoutWaiting) {
  int port = 0;
  const int listener = GuardedLoopbackListener(/*max_per_peer=*/2, &port);
  ASSERT_GE(listener, 0);
  std::vector<int> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(ConnectFrom("127.0.0.3", port));
  const int other = ConnectFrom("127.0.0.1", port);
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof(peer);
  std::vector<int> served;
  for (int i = 0; i < 2; ++i) {
    const int c =
        accept(listener, reinterpret_cast<sockaddr*>(&peer), &peer_len);
    ASSERT_GE(c, 0);
    served.push_back(c);
  }
  errno = 0;
  EXPECT_EQ(accept(listener, nullptr, nullptr), -1);  // the third: refused
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_TRUE(ClosedByServer(clients[2], absl::Seconds(1)));
  const int c = accept(listener, nullptr, nullptr);  // another peer: served
  EXPECT_GE(c, 0);
  EXPECT_EQ(GuardedListenerCounts(port).refused_peer, 1);
  for (int fd : clients) close(fd);
  for (int fd : served) close(fd);
  close(c);
  close(other);
  UnguardListener(port);
  close(listener);
}

// A client that opens one connection after another (probes, scrapes) is
// never refused for the ones it closed: they count no more at once, also
// right after a sweep.
TEST(ListenerGuardTest, ConnectionsClosedOneAfterAnotherFreeTheirPlace) {
  int port = 0;
  const int listener = GuardedLoopbackListener(/*max_per_peer=*/2, &port);
  ASSERT_GE(listener, 0);
  // One connection stays open all along (a slow request, or one whose
  // close lingers); each other one gets a descriptor of its own, as with a
  // server whose workers close theirs in any order.
  const int held_client = ConnectFrom("127.0.0.3", port);
  const int held = accept(listener, nullptr, nullptr);
  ASSERT_GE(held, 0);
  std::vector<int> placeholders;
  for (int i = 0; i < 20; ++i) {
    const int client = ConnectFrom("127.0.0.3", port);
    ASSERT_GE(client, 0);
    const int served = accept(listener, nullptr, nullptr);
    ASSERT_GE(served, 0) << "connection " << i << " refused";
    close(served);
    placeholders.push_back(dup(listener));  // takes the number just freed
    close(client);
  }
  EXPECT_EQ(GuardedListenerCounts(port).refused_peer, 0);
  for (int fd : placeholders) close(fd);
  close(held);
  close(held_client);
  UnguardListener(port);
  close(listener);
}

// The server's state of accepted connection `fd` (TCP_INFO).
int TcpState(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  return info.tcpi_state;
}

// A server that answered and shut down its side keeps the descriptor until
// it reads the client's end (civetweb's graceful close). A client that
// closed its side no longer counts against its cap; one that keeps it open
// still does.
TEST(ListenerGuardTest, ConnectionsClosedByBothEndsCountNoMore) {
  int port = 0;
  const int listener = GuardedLoopbackListener(/*max_per_peer=*/2, &port);
  ASSERT_GE(listener, 0);
  std::vector<int> clients, served;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(ConnectFrom("127.0.0.3", port));
    served.push_back(accept(listener, nullptr, nullptr));
    ASSERT_GE(served.back(), 0);
    shutdown(served.back(), SHUT_WR);  // the answer is sent
  }
  // The first client closes; the second keeps its side open.
  close(clients[0]);
  const absl::Time until = absl::Now() + absl::Seconds(5);
  // (Linux reports TCP_CLOSE for the descriptor once both ends closed.)
  auto both_closed = [&] {
    const int state = TcpState(served[0]);
    return state == TCP_CLOSE || state == TCP_TIME_WAIT;
  };
  while (!both_closed() && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(both_closed()) << TcpState(served[0]);
  // One place is free (the first's), not two.
  const int third = ConnectFrom("127.0.0.3", port);
  const int served_third = accept(listener, nullptr, nullptr);
  EXPECT_GE(served_third, 0);
  const int fourth = ConnectFrom("127.0.0.3", port);
  errno = 0;
  EXPECT_EQ(accept(listener, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_TRUE(ClosedByServer(fourth, absl::Seconds(1)));
  EXPECT_EQ(GuardedListenerCounts(port).refused_peer, 1);
  for (int fd : {clients[1], third, fourth, served[0], served[1], served_third})
    close(fd);
  UnguardListener(port);
  close(listener);
}

TEST(ListenerGuardTest, TheListenerCapClosesWhatComesPastIt) {
  Server s = StartServer();
  ASSERT_NE(s.server, nullptr);
  ListenerCaps caps;
  caps.max_connections = 6;
  caps.max_per_peer = 6;
  GuardListener(s.port, caps);
  std::vector<int> flood;
  for (int i = 0; i < 10; ++i) {
    const int fd =
        ConnectFrom(absl::StrCat("127.0.0.", 10 + i).c_str(), s.port);
    ASSERT_GE(fd, 0);
    flood.push_back(fd);
  }
  int closed = 0;
  for (int fd : flood)
    closed += ClosedByServer(fd, absl::Milliseconds(500)) ? 1 : 0;
  EXPECT_EQ(closed, 4);
  EXPECT_EQ(GuardedListenerCounts(s.port).refused_total, 4);
  for (int fd : flood) close(fd);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(Connects(s.port));  // room again once they closed
  UnguardListener(s.port);
  s.server->Shutdown();
}

TEST(ListenerGuardTest, TheProbeTellsAnAcceptingListenerFromADeadOne) {
  Server s = StartServer();
  ASSERT_NE(s.server, nullptr);
  EXPECT_TRUE(
      ProbeListener(absl::StrCat("127.0.0.1:", s.port), absl::Seconds(2)).ok());
  // A socket that listens but never accepts: what a listener gRPC stopped
  // looks like from outside.
  int dead_port = 0;
  const int dead = ListenOnLoopback(&dead_port);
  ASSERT_GE(dead, 0);
  const std::string dead_address = absl::StrCat("127.0.0.1:", dead_port);
  absl::Status st = ProbeListener(dead_address, absl::Milliseconds(300));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("no longer accepts"), std::string::npos) << st;
  close(dead);
  // Nothing listens there now.
  st = ProbeListener(dead_address, absl::Milliseconds(300));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  s.server->Shutdown();
}

TEST(ListenerGuardTest, TheProbeRefusesABadAddress) {
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:x", "127.0.0.1:0",
                          "127.0.0.1:70000", "[::1", "[::1]4000"}) {
    EXPECT_EQ(ProbeListener(bad, absl::Milliseconds(100)).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(ListenerGuardTest, AWildcardListenerIsProbedOnLoopback) {
  EXPECT_EQ(silo::ProbeAddressOf("0.0.0.0:0", 4000), "127.0.0.1:4000");
  EXPECT_EQ(silo::ProbeAddressOf("[::]:0", 4000), "[::1]:4000");
  EXPECT_EQ(silo::ProbeAddressOf("10.1.2.3:4000", 4000), "10.1.2.3:4000");
  EXPECT_EQ(silo::ProbeAddressOf("[fd00::1]:0", 4001), "[fd00::1]:4001");
}

TEST(ListenerGuardTest, TheWatchSaysWhenAListenerStopsAccepting) {
  const int dead = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(bind(dead, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(dead, 16), 0);
  socklen_t len = sizeof(a);
  getsockname(dead, reinterpret_cast<sockaddr*>(&a), &len);
  Server live = StartServer();
  // Probed by hand here, each probe waiting 200 ms.
  silo::ListenerWatch watch(absl::ZeroDuration(), absl::Milliseconds(200));
  watch.Add("gateway", "127.0.0.1:0", live.port);
  watch.Add("silo", "127.0.0.1:0", ntohs(a.sin_port));
  watch.ProbeAll();
  EXPECT_NE(watch.NotReadyBecause().find("the silo listener does not accept"),
            std::string::npos)
      << watch.NotReadyBecause();
  EXPECT_EQ(watch.UnhealthyBecause(), "");  // not yet: one probe
  for (int i = 1; i < silo::ListenerWatch::kDeadAfter; ++i) watch.ProbeAll();
  EXPECT_NE(watch.UnhealthyBecause().find("the silo listener has not accepted"),
            std::string::npos)
      << watch.UnhealthyBecause();
  close(dead);
  live.server->Shutdown();
}

}  // namespace
}  // namespace granary::rpc
