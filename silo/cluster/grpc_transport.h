// File: silo/cluster/grpc_transport.h
// -----------------------------------------------------------------------------
// The Transport (silo/cluster/transport.h) between silo processes. Calls:
// one connection per other live silo, to its silo endpoint, speaking the
// gateway protocol (granary.v1.Gateway/Connect: one bidirectional stream,
// batched envelopes both ways). It is the gateway
// connection the client SDK uses underneath (rpc/gateway_set.h), so a call
// sent to another silo is the same CallBase a local call is: the reply
// resumes the awaiting grain as a message of its activation, deadlines and
// flow control included.
//
//   GrpcTransport transport(my_id, grain_types);
//   GRANARY_RETURN_IF_ERROR(transport.Start());
//   transport.OnView(view);                 // connects and drops silos
//   transport.Send("10.0.0.2:11111@1700000000000", call);
//
// A call to a silo that is declared Dead without leaving (crashed, cut
// off), unknown, or whose connection is lost fails at once with UNAVAILABLE
// (never a timeout); a silo that left gracefully (ShuttingDown first)
// answers the calls it took before its connection closes. Directory
// requests go over each silo's granary.v1.Directory service, probes over
// granary.v1.SiloControl.
//
// Links open lazily: a view only says where the live silos are, and a silo
// is connected to once a call is sent to it (TrySend, which is false until
// the link is up, or Send, which holds the call until then). A link that
// carried no call for `idle_timeout`, with none in flight, is closed. So a
// silo keeps links to the silos it calls, not to every silo of the cluster.
//
// Threading: thread-safe; OnView never blocks on the network (a connector
// thread of the transport's makes the connections, retrying failed ones).
#pragma once

#include <atomic>
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
#include "directory/directory_transport.h"
#include "granary/v1/cluster.grpc.pb.h"
#include "silo/cluster/transport.h"

namespace granary {
class TimerThread;
}  // namespace granary

namespace granary::rpc {
class GatewaySet;
class Reconnector;
}  // namespace granary::rpc

namespace granary::silo {

// How long a link to another silo stays open without a call.
inline constexpr absl::Duration kPeerLinkIdleTimeout = absl::Minutes(2);
// Calls Send holds for one silo while its link is being made.
inline constexpr size_t kMaxCallsAwaitingLink = 4096;

class GrpcTransport final : public Transport {
 public:
  // `interfaces`: every grain type calls may be sent for. No thread runs
  // before Start.
  // `security`: what this silo presents to the others and trusts in them.
  // `timers`: the silo's timer thread, which the peers' call deadlines
  // share (null: a thread per peer); started and stopped by its owner.
  GrpcTransport(std::string self_id,
                std::vector<const InterfaceInfo*> interfaces,
                absl::Duration connect_timeout = absl::Seconds(2),
                rpc::ClientSecurity security = {},
                std::shared_ptr<TimerThread> timers = nullptr,
                absl::Duration idle_timeout = kPeerLinkIdleTimeout);
  ~GrpcTransport() override;
  GrpcTransport(const GrpcTransport&) = delete;
  GrpcTransport& operator=(const GrpcTransport&) = delete;

  // Starts the connector thread, which makes the connections OnView asks
  // for and retries failed ones, and the reconnector, which brings every
  // peer's lost connection back (one each, however many peers).
  absl::Status Start() override;
  void OnView(const v1::MembershipView& view) override;
  // Connects to every live member of the last view and waits until each
  // is connected; false after `timeout`.
  bool WaitForConnections(absl::Duration timeout);
  // Links open now (connected or reconnecting).
  size_t links() const;

  void Send(const std::string& silo_id, CallBase* call) override;
  bool TrySend(const std::string& silo_id, CallBase* call) override;
  bool IsConnected(const std::string& silo_id) const override;
  std::vector<std::string> connected() const override;

  void SendDirectory(const std::string& silo_id, directory::DirectoryOp op,
                     v1::DirectoryRequest request, Done done) override;
  void SendRebuild(const std::string& silo_id, v1::RebuildRequest request,
                   RebuildDone done) override;
  void Probe(const std::string& address, v1::ProbeRequest request,
             absl::Duration timeout, ProbeDone done) override;
  void SendMigration(const std::string& silo_id, v1::MigrationRequest request,
                     absl::Duration timeout, MigrationDone done) override;

  void Stop() override;

 private:
  const std::string self_id_;
  const std::vector<const InterfaceInfo*> interfaces_;
  const absl::Duration connect_timeout_;
  void ConnectLoop();
  std::shared_ptr<v1::SiloControl::Stub> ControlStub(
      const std::string& address);

  const rpc::ClientSecurity security_;
  const std::shared_ptr<TimerThread> timers_;
  const std::shared_ptr<rpc::Reconnector> reconnector_;
  const absl::Duration idle_timeout_;
  directory::GrpcDirectoryTransport directory_;
  struct PeerLink {
    std::shared_ptr<rpc::GatewaySet> set;
    std::atomic<int64_t> used_ns{0};  // MonoNanos of the last call sent
  };
  // Asks the connector for a link to `id` (a live member not linked yet).
  void DemandLocked(const std::string& id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes links idle for idle_timeout_; returns when to look again.
  absl::Time CloseIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails the calls Send holds for `id` with `why` (outside mu_).
  static void FailAll(std::vector<CallBase*> calls, const absl::Status& why);
  mutable Mutex mu_;
  mutable CondVar cv_;
  absl::flat_hash_map<std::string, std::shared_ptr<PeerLink>> links_
      ABSL_GUARDED_BY(mu_);
  // Live members of the last view: id -> silo endpoint.
  absl::flat_hash_map<std::string, std::string> wanted_ ABSL_GUARDED_BY(mu_);
  // Members a call asked for that are not linked yet, with when it last
  // did: the connector makes these links, and forgets a demand no call
  // renewed for idle_timeout_.
  mutable absl::flat_hash_map<std::string, absl::Time> demanded_
      ABSL_GUARDED_BY(mu_);
  // Calls Send holds until their silo's link is up.
  absl::flat_hash_map<std::string, std::vector<CallBase*>> awaiting_
      ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread connector_;
  // Close connections of silos that left the view.
  std::vector<std::thread> closers_ ABSL_GUARDED_BY(mu_);
  // Peers seen ShuttingDown: their connections drain when they go.
  absl::flat_hash_set<std::string> left_gracefully_ ABSL_GUARDED_BY(mu_);
  // Probe stubs by silo endpoint.
  Mutex probe_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<v1::SiloControl::Stub>>
      probe_stubs_ ABSL_GUARDED_BY(probe_mu_);
};

}  // namespace granary::silo
