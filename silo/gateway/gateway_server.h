// File: silo/gateway/gateway_server.h
// -----------------------------------------------------------------------------
// The silo's gateway: the gRPC server clients connect to. It serves the
// gateway protocol (`granary.v1.Gateway`, see gateway_service.h) that the
// client SDK multiplexes its calls over, every grain type the silo hosts as a
// standard gRPC service (see grpc_bridge.h), the standard health service, and
// server reflection, which lists the grain services so tools such as grpcurl
// need nothing but the address.
//
//   GatewayServer gateway(&silo, "127.0.0.1:0");
//   GRANARY_RETURN_IF_ERROR(gateway.Start());   // after silo.Start()
//   std::cout << gateway.address();             // 127.0.0.1:<bound port>
//   ...
//   silo.Stop();     // finishes every call still in the silo
//   gateway.Stop();
//
// Lifecycle: New --Start()--> Serving --Stop()--> Stopped. Stop the silo
// first: it answers whatever the gateway still waits for, so the gateway's
// shutdown never waits on a grain. Stop() is idempotent.
//
// Threading: Start/Stop from one thread; gRPC's threads run the calls.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rpc/limits.h"
#include "rpc/security.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace granary::rpc {
struct AuthCounters;
}  // namespace granary::rpc

namespace granary::v1 {
class MembershipView;
}  // namespace granary::v1

namespace granary::silo {

class Runtime;
class GatewayService;

class GatewayServer {
 public:
  // Largest request or reply message the gateway accepts (bigger ones fail
  // with RESOURCE_EXHAUSTED).
  static constexpr int kDefaultMaxMessageBytes = 4 << 20;
  // Unfinished calls per client stream at which the gateway stops reading it.
  static constexpr int kDefaultMaxInFlight = 16384;

  // `address` is HOST:PORT; port 0 picks a free port.
  GatewayServer(Runtime* silo, std::string address,
                int max_message_bytes = kDefaultMaxMessageBytes,
                int max_in_flight = kDefaultMaxInFlight);
  ~GatewayServer();
  GatewayServer(const GatewayServer&) = delete;
  GatewayServer& operator=(const GatewayServer&) = delete;

  // Gateway-protocol streams open now.
  int open_streams() const;

  // What Gateway/Cluster reports (set before Start); unset: this silo alone.
  void set_cluster_view(std::function<void(v1::MembershipView*)> fn) {
    cluster_view_ = std::move(fn);
  }

  // TLS, client certificates and bearer tokens (set before Start; default
  // plaintext, anonymous). `refused` (may be null, must outlive the
  // server) counts calls refused for their token.
  void set_security(rpc::ServerSecurity security, rpc::AuthCounters* refused) {
    security_ = std::move(security);
    refused_ = refused;
  }

  // gRPC's limits (rpc/limits.h; its max_message_bytes is the
  // constructor's) and the bytes one gateway-protocol stream may hold
  // (GatewayServiceOptions::max_connection_bytes), and how many such
  // streams may be open (max_streams). Set before Start.
  void set_limits(const rpc::ServerLimits& limits, int64_t max_connection_bytes,
                  int max_streams) {
    limits_ = limits;
    max_connection_bytes_ = max_connection_bytes;
    max_streams_ = max_streams;
  }

  // Binds and starts serving. INVALID_ARGUMENT for an address gRPC cannot
  // parse, UNAVAILABLE when it cannot bind.
  absl::Status Start();
  // Clients are told to go elsewhere (GatewayService::Drain) and have half
  // of `grace` to half-close; streams then finish once the calls they
  // carried are answered; those still open after `grace` are cancelled. A silo
  // of a cluster passes calls on after it stopped, so it gives them longer than
  // a silo alone.
  void Stop(absl::Duration grace = absl::Milliseconds(500));

  // The bound address, with the real port once started.
  const std::string& address() const { return bound_address_; }
  int port() const { return port_; }

 private:
  Runtime* const silo_;
  const std::string requested_address_;
  const int max_message_bytes_;
  const int max_in_flight_;
  std::unique_ptr<GatewayService> gateway_;
  std::function<void(v1::MembershipView*)> cluster_view_;
  rpc::ServerSecurity security_;
  rpc::AuthCounters* refused_ = nullptr;
  rpc::ServerLimits limits_;
  int64_t max_connection_bytes_ = int64_t{64} << 20;
  int max_streams_ = 16384;
  std::string bound_address_;
  int port_ = 0;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace granary::silo
