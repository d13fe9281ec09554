// File: silo/gateway/gateway_service.h
// -----------------------------------------------------------------------------
// The silo side of the gateway protocol (proto/granary/v1/gateway.proto):
// `Gateway.Connect`, one bidirectional stream per client connection carrying
// batches of requests in and batches of replies out, and `Gateway.Status`.
//
//   GatewayService service(&silo, {.max_in_flight = 16384});
//   builder.RegisterService(service.grpc_service());
//   ...
//   service.Drain();  // clients send their calls elsewhere and half-close
//   service.WaitForStreamsClosed(grace);
//   service.Stop();   // finishes every stream once its replies are written
//
// Per stream (see GatewayServerStream in the .cc):
//   - requests are routed by gRPC path ("/granary.examples.Counter/Add") to
//     the silo; bad ones (unknown method, bad key, payload that does not
//     parse) get an error reply and cost the stream nothing;
//   - while `max_in_flight` calls are unfinished (one-way ones until their
//     turn ran), or its calls and unwritten replies hold
//     `max_connection_bytes`, or (client streams) the silo's budget for
//     remote calls is used up, the stream is not read, so gRPC flow control
//     pushes back on the client and the stream holds at most that plus one
//     batch;
//   - replies are coalesced: whatever finished while the previous write was
//     on the wire goes out in the next batch (at most `max_batch_bytes`);
//   - a client that disconnects cancels nothing; its replies are dropped.
//
// Threading: thread-safe; gRPC threads read, silo workers finish calls.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace granary::v1 {
class MembershipView;
}  // namespace granary::v1

namespace granary::silo {

class Runtime;

struct GatewayServiceOptions {
  // Unfinished calls per stream at which the silo stops reading it.
  int max_in_flight = 16384;
  // Largest message the gateway sends or receives; a reply bigger than this
  // fails with RESOURCE_EXHAUSTED instead of breaking the stream.
  int max_message_bytes = 4 << 20;
  // Reply batches are cut at about this many bytes.
  int max_batch_bytes = 1 << 20;
  // Bytes one stream may hold (its unfinished calls, by key and payload
  // size plus a fixed cost, and its replies not yet written) past which
  // it is not read. 0: no bound. A client gateway's streams also stop
  // while the silo's budget (Runtime::remote_memory()) is used up; streams
  // from other silos only on their own.
  int64_t max_connection_bytes = int64_t{64} << 20;
  // Streams open at once (over all connections); more are refused with
  // RESOURCE_EXHAUSTED. Each costs about 20 KiB, mostly gRPC's. 0: no
  // bound.
  int max_streams = 16384;
  // The gateway address reported by Status.
  std::string address;
  // Fills the membership view Cluster reports; unset: this silo alone.
  std::function<void(v1::MembershipView*)> cluster_view;
  // The silo endpoint's instance, serving other silos: requests' `hops` and
  // `chain_id` are honoured. A client gateway ignores them, so a client
  // cannot join another caller's call chain.
  bool from_silos = false;
};

class GatewayService {
 public:
  // `silo` may be nullptr and attached later (before or while serving:
  // calls until then are answered UNAVAILABLE), for servers built before
  // the silo exists.
  GatewayService(Runtime* silo, GatewayServiceOptions options);
  void Attach(Runtime* silo);
  ~GatewayService();
  GatewayService(const GatewayService&) = delete;
  GatewayService& operator=(const GatewayService&) = delete;

  // The gRPC service to register with the server.
  grpc::Service* grpc_service();

  // The address Status reports (known once the server has bound).
  void set_address(std::string address);

  // The gateway is going away: every stream's client is told so (a batch
  // with `draining`), sends the calls it queued and half-closes; the
  // stream ends with OK once they are answered. Requests still read are
  // taken (a lone silo answers them UNAVAILABLE; a silo in a cluster
  // passes them on). Idempotent.
  void Drain();

  // New requests are no longer read; every stream finishes with
  // UNAVAILABLE (and the `granary-gateway-stopping` trailer) once the
  // replies of its accepted calls are written. Idempotent.
  void Stop();

  // Streams open now.
  int open_streams() const;
  // Waits until no stream is open; false after `timeout`.
  bool WaitForStreamsClosed(absl::Duration timeout);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace granary::silo
