// A TCP proxy that can cut the link it carries: the fault-injecting
// transport of the partition tests. A silo that advertises the proxy's
// address (--silo_advertise) is reached by the others only through it, so
// Cut() partitions that silo from them while it can still reach them (and
// the primary's table) itself.
//
//   FaultProxy proxy("127.0.0.1:5000");   // where the silo really listens
//   ASSERT_TRUE(proxy.Start().ok());      // proxy.address(): 127.0.0.1:port
//   ...
//   proxy.Cut();                          // a black hole from now on
//
// A cut is a black hole, not a refusal: bytes on open connections are read
// and dropped, and new connections are accepted and never answered, so the
// other side sees timeouts, as across a real partition. A delay makes the
// link slow instead.
//
// Threading: thread-safe; one thread per connection direction.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/sync.h"

namespace granary::testing {

// A port on 127.0.0.1 that was free a moment ago (for a listener whose
// port must be known before it starts).
int FreePort();
// A free port of 127.0.0.1 below the kernel's ephemeral range, so that no
// outgoing connection takes it while a server listening there restarts; 0
// if none was found.
int FreeFixedPort();

class FaultProxy {
 public:
  // `target`: the upstream IPv4 HOST:PORT.
  explicit FaultProxy(std::string target) : target_(std::move(target)) {}
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  // Listens on 127.0.0.1 at a free port.
  absl::Status Start();
  std::string address() const { return address_; }

  void Cut() { cut_.store(true); }
  // Ends the cut. Connections that lost bytes to it are closed (their
  // streams are broken), so their clients reconnect at once.
  void Heal() { cut_.store(false); }
  bool cut() const { return cut_.load(); }
  // Every byte is delivered `delay` after it arrived (a slow link; order is
  // kept).
  void SetDelay(absl::Duration delay) {
    delay_ns_.store(absl::ToInt64Nanoseconds(delay));
  }
  // Bytes read and dropped since the cut.
  uint64_t dropped() const { return dropped_.load(); }
  // Bytes that were held back by a delay (SetDelay) before delivery.
  uint64_t delayed() const { return delayed_.load(); }

 private:
  struct Conn;
  void Accept();
  void Pump(std::shared_ptr<Conn> conn, bool downstream);
  void Sink(int fd);
  void Spawn(std::thread t);

  const std::string target_;
  std::string address_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::atomic<int64_t> delay_ns_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> delayed_{0};
  std::thread acceptor_;
  Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::testing
