// File: rpc/gateway_connection.h
// -----------------------------------------------------------------------------
// One gateway as its callers see it: the gRPC channel to it and the current
// Connect stream on that channel (rpc/gateway_client_stream.h). The set it
// belongs to (rpc/gateway_set.h) brings it up and picks it for calls.
//
//   GatewayClientStream* stream = connection.Acquire();  // nullptr while down
//
// Threading: thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/sync.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "rpc/gateway_client_stream.h"
#include "rpc/gateway_options.h"

namespace granary::rpc {

class GatewaySet;

// One gateway: its channel and the current stream to it.
class GatewayConnection {
 public:
  GatewayConnection(GatewaySet* set, std::string address,
                    const GatewaySetOptions& options);
  ~GatewayConnection();

  const std::string& address() const { return address_; }
  GatewaySet* set() const { return set_; }

  // The live stream with a reference for the caller, opening one when the
  // gateway is up and none is open; nullptr when the gateway is down.
  GatewayClientStream* Acquire();
  bool up() const { return up_.load(std::memory_order_acquire); }
  // The cluster says this gateway's silo is dead: calls avoid it.
  bool retired() const { return retired_.load(std::memory_order_relaxed); }
  void set_retired(bool r) { retired_.store(r, std::memory_order_relaxed); }
  int in_flight() const;
  // Drives a connection attempt until `until`: marks the link up once the
  // channel is connected.
  void TryConnect(absl::Time until);
  // Ends the current stream (Close).
  void CancelStream(const std::string& why);
  bool has_stream() const {
    MutexLock lock(&mu_);
    return stream_ != nullptr;
  }

  // Wakes whoever waits on the client's connection events.
  void Notify();
  // The gateway said it is shutting down (ReplyBatch.draining): calls go
  // to other gateways, and the channel's current connection must not carry
  // a new stream.
  void OnStreamDraining(GatewayClientStream* stream);
  // Called by the reconnector for a link that is up: when the channel has
  // left READY under a live stream, the gateway told the connection to go
  // (GOAWAY, its maximum connection age): the stream drains and the next
  // one opens on a new connection, before the gateway's grace ends.
  void CheckConnection();
  // `stream` drains (DrainFromClient): the link lets go of it, and the
  // next call opens a new stream (the channel connects anew for it), while
  // the old one's calls are still answered. The link stays up.
  void OnStreamRotated(GatewayClientStream* stream);
  // The stream ended with `status`.
  // `server_stopping`: the gateway said it is going away, so the channel's
  // current connection must not carry a new stream.
  void OnStreamDone(GatewayClientStream* stream, const grpc::Status& status,
                    bool server_stopping);
  // Sends `call` (with the caller's reference) again, through whichever
  // gateway the client picks now.
  void Resend(CallBase* call);
  // The stream's very last act (after it the client may be freed).
  void StreamGone();
  bool closed() const;
  // The cluster's membership as this gateway reports it.
  absl::StatusOr<v1::MembershipView> FetchCluster(absl::Duration timeout);

 private:
  GatewaySet* const set_;
  const std::string address_;
  const GatewaySetOptions& options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Gateway::Stub> stub_;
  mutable Mutex mu_;
  GatewayClientStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::atomic<bool> up_{false};  // written under mu_
  std::atomic<bool> retired_{false};
  // The gateway said it stops: wait for its connection to go before using
  // the channel again.
  bool await_new_connection_ ABSL_GUARDED_BY(mu_) = false;
  // When await_new_connection_ was set: past kAwaitNewConnectionLimit a
  // READY channel is taken as new (the gateway may have stopped and come
  // back between two looks at the channel, which then never leaves READY).
  absl::Time await_new_since_ ABSL_GUARDED_BY(mu_);
  // The channel was READY under stream_ (CheckConnection).
  bool stream_connected_ ABSL_GUARDED_BY(mu_) = false;
  // Streams rotated away (OnStreamRotated) that have not ended yet.
  absl::flat_hash_set<GatewayClientStream*> rotated_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::rpc
