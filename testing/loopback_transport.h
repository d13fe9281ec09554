// File: testing/loopback_transport.h
// -----------------------------------------------------------------------------
// The Transport (silo/cluster/transport.h) between silos of one process, for
// deterministic tests of the cluster: a LoopbackNetwork joins the silos, and
// each silo sends through a LoopbackTransport of its own. Messages go
// through the same wire encoding as between processes (a grain call is
// serialized and becomes a new call on the receiving silo, its reply comes
// back serialized), and a test can break links:
//
//   FakeClock clock;
//   LoopbackNetwork net(&clock);
//   GRANARY_RETURN_IF_ERROR(net.Start());
//   net.Attach(a_id, a_address, &silo_a, &partition_a);
//   LoopbackTransport to_others(&net, a_id);    // silo a's transport
//   net.SetFault(a_id, b_id, LoopbackNetwork::Fault::kBlackHole);
//   net.SetDelay(a_id, c_id, absl::Milliseconds(30));  // on `clock`
//   net.HealAll();                               // held messages go now
//
// Faults apply to requests in the direction they are set (a grain call, a
// directory request, a rebuild report, a probe); answers come back at once.
//   kRefuse     the connection is refused: TrySend is false, requests fail
//               UNAVAILABLE at once (a crashed silo, a closed port).
//   kBlackHole  requests vanish (a cut cable): the connection looks up;
//               held requests are delivered when the link heals, as TCP
//               would, fail UNAVAILABLE when the sender's view drops the
//               silo, and directory requests and probes time out
//               (DEADLINE_EXCEEDED after `request_timeout` on the clock).
// A delay holds every request of the link for that long on the clock.
//
// Threading: thread-safe. Requests are delivered inline on the sender's
// thread, or on the network's timer thread when delayed or healed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/clock.h"
#include "core/sync.h"
#include "core/timer_queue.h"
#include "silo/cluster/transport.h"

namespace granary::directory {
class DirectoryPartition;
}  // namespace granary::directory

namespace granary::silo {
class Runtime;
}  // namespace granary::silo

namespace granary::testing {

using silo::Runtime;
using silo::Transport;

class LoopbackNetwork {
 public:
  enum class Fault { kNone, kRefuse, kBlackHole };

  // Delays and timeouts run on `clock` (which must outlive the network).
  explicit LoopbackNetwork(Clock* clock,
                           absl::Duration request_timeout = absl::Seconds(5));
  ~LoopbackNetwork();  // Stop()
  LoopbackNetwork(const LoopbackNetwork&) = delete;
  LoopbackNetwork& operator=(const LoopbackNetwork&) = delete;

  absl::Status Start();
  // Fails every request still held or delayed UNAVAILABLE and stops the
  // timer thread. Idempotent.
  void Stop();

  // Silo `id` is reachable at `address`: its runtime takes grain calls, its
  // partition directory requests. Both must stay alive until Detach.
  void Attach(const std::string& id, const std::string& address, Runtime* silo,
              directory::DirectoryPartition* partition);
  // Silo `id` is gone (crashed): every link to it refuses.
  void Detach(const std::string& id);

  void SetFault(const std::string& from, const std::string& to, Fault fault);
  void SetDelay(const std::string& from, const std::string& to,
                absl::Duration delay);
  // Every link between a silo of `a` and one of `b`, both ways.
  void Partition(const std::vector<std::string>& a,
                 const std::vector<std::string>& b, Fault fault);
  // No fault or delay anywhere; requests held by black holes are delivered.
  void HealAll();

  // The runtime of the silo attached at `address` when silo `from` reaches
  // it (no fault on the link; a delay is not applied), else nullptr. For
  // requests answered in process (LoopbackReminders).
  Runtime* Reach(const std::string& from, const std::string& address) const;

  // Requests held by black holes now.
  size_t held() const;
  // Requests delivered so far.
  uint64_t delivered() const;

 private:
  friend class LoopbackTransport;
  struct Endpoint {
    std::string address;
    Runtime* silo = nullptr;
    directory::DirectoryPartition* partition = nullptr;
  };
  struct Packet;
  struct PacketTimer;
  using Link = std::pair<std::string, std::string>;

  // Sends a request from `from` to `to`: `deliver` runs with the receiver's
  // endpoint (inline, later, or never), `fail` with the reason it did not.
  // `timeout` (when not zero): fail DEADLINE_EXCEEDED after it when held.
  void Send(const std::string& from, const std::string& to,
            std::function<void(const Endpoint&)> deliver,
            std::function<void(absl::Status)> fail, absl::Duration timeout);
  // Whether `from` can connect to `to` now.
  bool Reachable(const std::string& from, const std::string& to) const;
  // The id of the silo at `address` ("" when none).
  std::string IdAt(const std::string& address) const;
  // Fails the held requests from `from` to `to` with `why`.
  void FailHeld(const std::string& from, const std::string& to,
                const absl::Status& why);
  void Fire(PacketTimer* timer);
  void Run(std::shared_ptr<Packet> packet);
  void Schedule(std::shared_ptr<Packet> packet, absl::Time when, bool timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  const absl::Duration request_timeout_;
  TimerQueue timers_;
  mutable Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, Endpoint> endpoints_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Link, Fault> faults_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Link, absl::Duration> delays_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Link, std::vector<std::shared_ptr<Packet>>> held_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<PacketTimer*> timers_pending_ ABSL_GUARDED_BY(mu_);
  uint64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
};

// One silo's Transport over a LoopbackNetwork.
class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(LoopbackNetwork* network, std::string self_id);
  ~LoopbackTransport() override;  // Stop()

  void OnView(const v1::MembershipView& view) override;
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
  // The request of `call` as the receiving silo decodes it; delivered
  // there, its answer finishes `call`.
  void Forward(const std::string& silo_id, CallBase* call);

  LoopbackNetwork* const network_;
  const std::string self_id_;
  mutable Mutex mu_;
  // Live members of the last view (other than this silo).
  absl::flat_hash_set<std::string> live_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace granary::testing
