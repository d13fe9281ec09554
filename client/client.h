// File: client/client.h
// -----------------------------------------------------------------------------
// The C++ client SDK: calls grains in a Granary cluster from outside it,
// through one or more silo gateways, with the same generated references that
// grain code uses.
//
//   granary::ClientOptions options;
//   options.gateways = {"127.0.0.1:30000"};
//   absl::StatusOr<std::unique_ptr<granary::Client>> client =
//       granary::Client::Connect(options);
//   CounterRef counter = (*client)->Get<CounterRef>("alice");
//   AddRequest req;
//   req.set_amount(5);
//   absl::StatusOr<CounterValue> v = counter.Add(req).Get();  // plain thread
//   CounterValue w = co_await counter.Add(req);               // coroutine
//   counter.Bump(req);                                        // one-way
//   (*client)->Close();
//
// Transport: one `granary.v1.Gateway/Connect` stream per gateway carries all
// of the client's calls to it, in batches (proto/granary/v1/gateway.proto).
// A grain's calls always take the same live gateway (hash of the grain id),
// so one-way sends to one grain arrive in order.
//
// Failures: when a gateway goes away, the calls in flight on it fail at once
// with UNAVAILABLE (never a silent wait for the deadline), new calls go to
// the other live gateways, and the client reconnects in the background. With
// no gateway live, calls fail with UNAVAILABLE immediately.
//
// Cancellation: a call made with CallOptions::cancel (a CancellationSource's
// token, core/cancel.h) fails with CANCELLED as soon as the source is
// cancelled, and the gateway is told, so the grain's turn sees its token fire
// (or the call, still queued, never runs).
//
// Flow control: at most `max_in_flight` calls are outstanding per gateway;
// past that a caller waits (or gets RESOURCE_EXHAUSTED, see `overflow`).
//
// Threading: thread-safe. Replies resume awaiting coroutines on the client's
// network threads: a coroutine continuation must not block (as with any
// gRPC callback). `.Get()` waits on the calling thread.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "core/grain_interface.h"
#include "rpc/gateway_options.h"

namespace granary::rpc {
class GatewaySet;
}  // namespace granary::rpc

namespace granary {

// The client's options (rpc/gateway_options.h documents each field, with
// its default): gateways, max_in_flight, overflow (kWait or kFail),
// max_message_bytes, connect_timeout, reconnect_period,
// gateway_refresh_period and location_cache_size.
struct ClientOptions : rpc::GatewayOptions {};

class Client final : public CallInvoker {
 public:
  // Connects to the gateways. INVALID_ARGUMENT for no gateways or an address
  // that is not HOST:PORT or bad limits; UNAVAILABLE when no gateway accepts
  // a connection within `connect_timeout`. Gateways not reachable yet are
  // tried again in the background.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);

  ~Client() override;  // Close(absl::ZeroDuration()) if not closed
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // A reference to grain `key` of RefT's type, calling through this client.
  template <typename RefT>
  RefT Get(std::string key) {
    Register(RefT::Interface());
    return RefT(this, std::move(key));
  }

  // Makes calls to grains of `iface` possible (Get does it for you).
  void Register(const InterfaceInfo& iface);

  // CallInvoker.
  void Invoke(CallBase* call) override;

  // Waits until at least one gateway is connected, up to `timeout`.
  // UNAVAILABLE when none is by then.
  absl::Status WaitForConnected(absl::Duration timeout);

  // Gateways connected now.
  int connected_gateways() const;
  // Every gateway the client knows: those it was given and those it learned
  // from the cluster's membership.
  std::vector<std::string> gateways() const;
  // Calls outstanding now, over all gateways.
  int in_flight() const;

  // Stops taking calls (they fail with FAILED_PRECONDITION), waits up to
  // `timeout` for the calls in flight, fails those still unfinished with
  // UNAVAILABLE, and closes the connections. Idempotent.
  void Close(absl::Duration timeout = absl::Seconds(10));

 private:
  explicit Client(std::unique_ptr<rpc::GatewaySet> gateways);
  std::unique_ptr<rpc::GatewaySet> gateways_;
};

}  // namespace granary
