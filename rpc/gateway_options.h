// File: rpc/gateway_options.h
// -----------------------------------------------------------------------------
// Options of a set of gateway connections (rpc/gateway_set.h).
// GatewayOptions are the ones the client SDK offers (ClientOptions is one,
// client/client.h); GatewaySetOptions add what only a silo's connections to
// its peers set (a closed code of UNAVAILABLE).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rpc/limits.h"
#include "rpc/security.h"

namespace granary {
class Clock;
class TimerThread;
}  // namespace granary

namespace granary::rpc {

class Reconnector;

struct GatewayOptions {
  // Gateway addresses (HOST:PORT); at least one.
  std::vector<std::string> gateways;
  // Calls outstanding per gateway connection (awaited calls until their
  // reply, one-way calls until written).
  int max_in_flight = 8192;
  // What a call finds when `max_in_flight` are outstanding: kWait blocks the
  // caller until one finishes; kFail fails it with RESOURCE_EXHAUSTED. A
  // call made on a network thread (from a coroutine resumed by a reply)
  // never blocks: it fails with RESOURCE_EXHAUSTED.
  enum class Overflow { kWait, kFail };
  Overflow overflow = Overflow::kWait;
  // Largest request the client sends; larger ones fail RESOURCE_EXHAUSTED
  // without reaching the wire. Match the silos' --max_message_bytes.
  int max_message_bytes = 4 << 20;
  // How long Connect() waits for the first gateway to accept a connection.
  absl::Duration connect_timeout = absl::Seconds(5);
  // How often a lost gateway is tried again.
  absl::Duration reconnect_period = absl::Milliseconds(100);
  // How often the client asks a gateway for the cluster's membership and
  // adds the gateways of Active silos it does not know yet (so a client
  // given one gateway of a cluster uses all of them); zero: never.
  absl::Duration gateway_refresh_period = absl::Seconds(5);
  // Grain locations remembered: when a gateway passes a call on to the silo
  // that hosts the grain, its reply names that silo's gateway, and the
  // grain's next calls go there directly (one hop) if the client has that
  // gateway. Emptied when full; 0 turns it off; negative is
  // INVALID_ARGUMENT.
  int location_cache_size = 100000;
  // TLS and the bearer token (rpc/security.h); default plaintext.
  ClientSecurity security;
  // The largest reply batch accepted, and keepalive pings that find a dead
  // or black-holed gateway within keepalive_time + keepalive_timeout
  // (rpc/limits.h). max_send_bytes is not used: see max_message_bytes.
  ChannelLimits channel;
};

struct GatewaySetOptions : GatewayOptions {
  // The code of calls made after Close (a silo's connection to a peer that
  // left the cluster uses UNAVAILABLE; the client SDK FAILED_PRECONDITION).
  absl::StatusCode closed_code = absl::StatusCode::kFailedPrecondition;
  // The clock of call deadlines (null: the system clock); it must outlive
  // the set. A silo passes its own, so a forwarded call's remaining time is
  // measured on the clock its deadline runs on.
  Clock* clock = nullptr;
  // A silo's peers share its timer thread and reconnector (null: the set
  // starts threads of its own), so its threads do not grow with the
  // cluster. Their owner starts them and stops them after the set closed;
  // a shared timer thread's clock is the deadlines' clock.
  std::shared_ptr<TimerThread> timer_thread;
  std::shared_ptr<Reconnector> reconnector;
};

}  // namespace granary::rpc
