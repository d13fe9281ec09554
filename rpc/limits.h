// File: rpc/limits.h
// -----------------------------------------------------------------------------
// What a remote peer can make a gRPC server or channel hold, bounded:
// message sizes, gRPC's own buffer memory (a ResourceQuota), concurrent
// streams per connection, and keepalive pings that find a dead or
// black-holed peer without waiting for a call's deadline.
//
//   grpc::ServerBuilder builder;
//   rpc::ApplyServerLimits(limits, &builder);
//   auto channel = rpc::NewChannel(address, credentials, ChannelLimits{});
//
// Every server of a silo applies ServerLimits (the silo's flags
// --grpc_memory_bytes, --max_streams_per_connection, --keepalive_time,
// --keepalive_timeout, --handshake_timeout); every channel, the SDK's and the
// silo's to its peers, is made with ChannelLimits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace grpc {
class Channel;
class ChannelArguments;
class ChannelCredentials;
class ServerBuilder;
}  // namespace grpc

namespace granary::rpc {

struct ServerLimits {
  // Largest message received or sent.
  int max_message_bytes = 4 << 20;
  // Memory gRPC may take for the connections' buffers (a ResourceQuota);
  // under pressure it shrinks read buffers and refuses new streams.
  int64_t memory_bytes = int64_t{512} << 20;
  // Streams (calls) one connection may have open at once; more wait in
  // the client (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
  int max_streams_per_connection = 128;
  // A connection silent this long is pinged; one that does not answer
  // within keepalive_timeout is closed.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // Clients may ping this often at most (more often: the connection is
  // closed with GOAWAY "too_many_pings"). ChannelLimits' default is above.
  absl::Duration min_client_ping_interval = absl::Seconds(10);
  // A new connection that has not finished its TLS handshake and sent its
  // HTTP/2 settings within this is closed (gRPC's own default is 120 s,
  // long enough for idle connections to pile up).
  absl::Duration handshake_timeout = absl::Seconds(5);
  // A connection this old is told to go (HTTP/2 GOAWAY; gRPC adds up to
  // 10 % either way); its streams may finish within the grace, then it is
  // closed. So a revoked token or certificate stops working on open
  // connections too, within age + grace. The SDK moves its calls to a new
  // connection as soon as the GOAWAY comes (rpc/gateway_connection.h).
  absl::Duration max_connection_age = absl::Minutes(30);
  absl::Duration max_connection_age_grace = absl::Minutes(1);
};

// INVALID_ARGUMENT naming the field (and flag) that is out of range.
absl::Status ValidateServerLimits(const ServerLimits& limits);

// Sets `limits` on a server about to be built.
void ApplyServerLimits(const ServerLimits& limits,
                       grpc::ServerBuilder* builder);

struct ChannelLimits {
  // Largest message accepted from the server.
  int max_receive_bytes = 64 << 20;
  // Largest message sent (-1: gRPC's unlimited; callers check their own).
  int max_send_bytes = -1;
  // Pings a connection silent this long, also without calls, and drops it
  // (the calls fail UNAVAILABLE, the channel reconnects) when no answer
  // comes within keepalive_timeout. At least the servers'
  // min_client_ping_interval.
  absl::Duration keepalive_time = absl::Seconds(20);
  absl::Duration keepalive_timeout = absl::Seconds(10);
};

// The channel arguments of `limits`, for callers that add their own.
void ApplyChannelLimits(const ChannelLimits& limits,
                        grpc::ChannelArguments* args);

// A channel to `address` with `limits`.
std::shared_ptr<grpc::Channel> NewChannel(
    const std::string& address,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const ChannelLimits& limits = ChannelLimits());

}  // namespace granary::rpc
