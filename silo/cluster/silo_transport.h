// File: silo/cluster/silo_transport.h
// -----------------------------------------------------------------------------
// Silo-to-silo calls: one connection per other live silo, to its silo
// endpoint, speaking the gateway protocol (granary.v1.Gateway/Connect: one
// bidirectional stream, batched envelopes both ways). It is the gateway
// connection the client SDK uses underneath (rpc/gateway_set.h), so a call
// sent to another silo is the same CallBase a local call is: the reply
// resumes the awaiting grain as a message of its activation, deadlines and
// flow control included.
//
//   SiloTransport transport(my_id, grain_types);
//   transport.OnView(view);                 // connects and drops silos
//   transport.Send("10.0.0.2:11111@1700000000000", call);
//
// A call to a silo that is declared Dead without leaving (crashed, cut
// off), unknown, or whose connection is lost fails at once with UNAVAILABLE
// (never a timeout); a silo that left gracefully (ShuttingDown first)
// answers the calls it took before its connection closes.
//
// Threading: thread-safe; OnView never blocks on the network (a connector
// thread of the transport's makes the connections, retrying failed ones).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "core/grain_interface.h"
#include "core/sync.h"
#include "granary/v1/cluster.pb.h"

namespace granary::rpc {
class GatewaySet;
}  // namespace granary::rpc

namespace granary::silo {

class SiloTransport {
 public:
  // `interfaces`: every grain type calls may be sent for.
  SiloTransport(std::string self_id,
                std::vector<const InterfaceInfo*> interfaces,
                absl::Duration connect_timeout = absl::Seconds(2));
  ~SiloTransport();
  SiloTransport(const SiloTransport&) = delete;
  SiloTransport& operator=(const SiloTransport&) = delete;

  // Has the live members not connected yet connected (in the background)
  // and closes the connections of members that are Dead or gone from the
  // view (their calls in flight fail UNAVAILABLE).
  void OnView(const v1::MembershipView& view);
  // Waits until every live member of the last view is connected; false
  // after `timeout`.
  bool WaitForConnections(absl::Duration timeout);

  // Sends `call` (taking the caller's reference) to silo `silo_id`.
  void Send(const std::string& silo_id, CallBase* call);
  // Like Send, but false (and `call` untouched) while there is no
  // connection to `silo_id` (it is still being made, or the silo is gone).
  bool TrySend(const std::string& silo_id, CallBase* call);

  // Ids of the silos connected now.
  std::vector<std::string> connected() const;
  // Whether calls to silo `silo_id` can be sent now (TrySend would take
  // them).
  bool IsConnected(const std::string& silo_id) const;
  // Closes every connection; later sends fail UNAVAILABLE.
  void Close();

 private:
  const std::string self_id_;
  const std::vector<const InterfaceInfo*> interfaces_;
  const absl::Duration connect_timeout_;
  void ConnectLoop();

  mutable Mutex mu_;
  CondVar cv_;
  absl::flat_hash_map<std::string, std::shared_ptr<rpc::GatewaySet>> links_
      ABSL_GUARDED_BY(mu_);
  // Live members of the last view: id -> silo endpoint.
  absl::flat_hash_map<std::string, std::string> wanted_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread connector_;
  // Close connections of silos that left the view.
  std::vector<std::thread> closers_ ABSL_GUARDED_BY(mu_);
  // Peers seen ShuttingDown: their connections drain when they go.
  absl::flat_hash_set<std::string> left_gracefully_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::silo
