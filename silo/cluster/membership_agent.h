// File: silo/cluster/membership_agent.h
// -----------------------------------------------------------------------------
// A silo's part in cluster membership: it joins the table (Joining, then
// Active), writes a heartbeat with its activation count, probes a few other
// silos over their SiloControl service, turns missed probes into suspicion
// votes in the table, declares a silo Dead when enough fresh votes agree,
// and leaves (ShuttingDown, then Dead) on a graceful stop. A silo that finds
// itself declared Dead calls its `on_declared_dead` handler (granary-silo
// exits non-zero).
//
//   MembershipAgent agent(&table, me, MembershipOptions{});
//   agent.SetDeclaredDeadHandler([] { ... });
//   GRANARY_RETURN_IF_ERROR(agent.Join());
//   agent.Start();
//   table_watch([&](const v1::MembershipView& v) { agent.OnView(v); });
//   ...
//   agent.Leave();
//
// Probes: silos are placed on a ring by the hash of their id; each probes
// the `probe_fanout` live silos after it, so every live silo is probed by
// that many others. A probe that fails or times out is a miss;
// `missed_probes` consecutive misses make the prober vote. A silo is Dead
// once `votes_to_kill` votes younger than `vote_expiry` are on its row
// (fewer when fewer other silos are alive to vote).
//
// Threading: thread-safe. The agent runs one thread of its own; table calls
// may block it (RemoteMembershipTable).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/sync.h"
#include "granary/v1/cluster.grpc.pb.h"
#include "storage/membership_table.h"

namespace granary::silo {

struct MembershipOptions {
  absl::Duration probe_interval = absl::Seconds(1);
  absl::Duration probe_timeout = absl::Milliseconds(500);
  int missed_probes = 2;
  int votes_to_kill = 2;
  absl::Duration vote_expiry = absl::Seconds(30);
  int probe_fanout = 2;
  // How often the table is read again when no pushed view arrived.
  absl::Duration refresh_period = absl::Seconds(1);
  absl::Duration heartbeat_period = absl::Seconds(5);
  // The silo endpoint that hosts the table (a dev cluster's primary): never
  // voted dead, since nobody could record anything without it anyway.
  std::string table_host;
  // The membership lease (zero: none). The agent reads the table every
  // lease / 3; a read sent at time S that shows this silo alive (and not
  // Dead) holds it until S + lease. Shorter than the quickest the others
  // can declare this silo dead (SafeLease), so once a silo cut off from the
  // table stops running grain code, no other silo has activated its grains
  // yet.
  absl::Duration lease = absl::ZeroDuration();
};

// The longest lease `o` allows, with a margin: 80 % of the quickest death
// declaration ((missed_probes - 1) x probe_interval + probe_timeout).
absl::Duration SafeLease(const MembershipOptions& o);

// INVALID_ARGUMENT naming the option that is out of range.
absl::Status ValidateMembershipOptions(const MembershipOptions& o);

class MembershipAgent {
 public:
  // `self` names this silo (address, generation, gateway, http); its status
  // is set by the agent. `activations` is read for each heartbeat.
  MembershipAgent(storage::MembershipTable* table, v1::Member self,
                  MembershipOptions options,
                  std::function<int64_t()> activations = nullptr);
  ~MembershipAgent();
  MembershipAgent(const MembershipAgent&) = delete;
  MembershipAgent& operator=(const MembershipAgent&) = delete;

  // Runs (on the agent's thread) once this silo is declared Dead.
  void SetDeclaredDeadHandler(std::function<void()> fn);
  // With a lease (MembershipOptions::lease), called with the monotonic time
  // (MonoNanos) until which this silo is confirmed a member, each time the
  // lease is renewed; set before Start.
  void SetLeaseListener(std::function<void(int64_t until_mono_ns)> fn);
  // Called with every newer view this agent adopts, in version order (never
  // concurrently); it must not block.
  void SetViewListener(std::function<void(const v1::MembershipView&)> fn);

  // Writes this silo as Joining, then Active. UNAVAILABLE when the table
  // cannot be reached within `timeout`.
  absl::Status Join(absl::Duration timeout = absl::Seconds(30));
  // Starts probing and heartbeats.
  void Start();
  // A view pushed by the table (watch or subscription); older ones are
  // ignored.
  void OnView(const v1::MembershipView& view);
  // Marks this silo ShuttingDown (call before deactivating grains).
  void BeginLeave();
  // Marks it Dead and stops the agent's thread.
  void Leave();

  v1::MembershipView view() const;
  const std::string& id() const { return id_; }
  // Probes this agent sent that failed, and votes it wrote.
  uint64_t probes_missed() const { return probes_missed_.load(); }
  uint64_t votes_cast() const { return votes_cast_.load(); }

 private:
  void Loop();
  bool stopping_declared() const {
    MutexLock lock(&mu_);
    return declared_dead_;
  }
  void Refresh();
  // Writes `mutate(row)` of member `id` with compare-and-swap retries.
  absl::Status Update(const std::string& id,
                      const std::function<bool(v1::Member*)>& mutate);
  absl::Status WriteSelf(v1::MemberStatus status);
  void ProbeRound();
  bool Probe(const v1::Member& target);
  void Vote(const std::string& target_id);

  storage::MembershipTable* const table_;
  const MembershipOptions options_;
  const std::function<int64_t()> activations_;
  v1::Member self_;
  const std::string id_;

  mutable Mutex mu_;
  CondVar cv_;
  v1::MembershipView view_ ABSL_GUARDED_BY(mu_);
  Mutex listener_mu_;
  std::function<void(const v1::MembershipView&)> listener_
      ABSL_GUARDED_BY(listener_mu_);
  int64_t notified_version_ ABSL_GUARDED_BY(listener_mu_) = -1;
  absl::Time viewed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool declared_dead_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_dead_ ABSL_GUARDED_BY(mu_);

  // Agent thread only.
  std::map<std::string, int> misses_;
  std::map<std::string, std::unique_ptr<v1::SiloControl::Stub>> stubs_;
  absl::Time last_heartbeat_ = absl::InfinitePast();

  std::atomic<uint64_t> probes_missed_{0};
  std::atomic<uint64_t> votes_cast_{0};
  std::thread thread_;
  // Renews the lease (when there is one).
  void LeaseLoop();
  std::function<void(int64_t)> on_lease_;  // set before Start
  std::thread lease_thread_;
};

}  // namespace granary::silo
