// File: silo/cluster/membership_agent.h
// -----------------------------------------------------------------------------
// A silo's part in cluster membership: it joins the table (Joining, then
// Active), writes a heartbeat with its activation count and load, probes a
// few other
// silos through the transport (silo/cluster/transport.h), turns missed
// probes into suspicion
// votes in the table, declares a silo Dead when enough fresh votes agree,
// and leaves (ShuttingDown, then Dead) on a graceful stop. A silo that finds
// itself declared Dead calls its `on_declared_dead` handler (granary-silo
// exits non-zero).
//
//   MembershipAgent agent(&table, &transport, me, MembershipOptions{});
//   agent.SetDeclaredDeadHandler([] { ... });
//   GRANARY_RETURN_IF_ERROR(agent.Join());
//   GRANARY_RETURN_IF_ERROR(agent.Start());
//   table_watch([&](const v1::MembershipView& v) { agent.OnView(v); });
//   ...
//   agent.Leave();                            // ends with Stop()
//
// Probes: silos are placed on a ring by the hash of their id; each probes
// the `probe_fanout` live silos after it, so every live silo is probed by
// that many others, and every live silo whose heartbeat is stale (so that
// many silos silent at once, neighbours on the ring, still get the votes
// that declare them dead). A round's probes run at once. A probe that fails or
// times out is a miss; `missed_probes` consecutive misses make the prober vote.
// A silo is Dead once `votes_to_kill` votes younger than `vote_expiry` are on
// its row (fewer when fewer other silos are alive to vote).
//
// Local health (after SWIM's Lifeguard): a prober whose round starts late,
// whose answered probes come back slowly, or whose host (cgroup) is starved
// of CPU (cpu_pressure) cannot tell a slow peer from a dead one. Each such
// round raises its health score by one (up to kMaxHealthScore) and each
// clean round lowers it by one. Its probe timeout is probe_timeout x
// (1 + score), and in such a round, or while the score is above zero, a
// probe that timed out is excused: it neither counts as a miss nor breaks a
// run of misses, up to kMaxExcusedTimeouts in a row per peer (a peer silent
// that long counts again). A probe refused (an error before the timeout:
// nothing listens, another generation answers) is a miss whatever the
// score, so a crashed silo is found as fast on a busy host as on an idle
// one.
//
// Rounds and the lease's re-reads are coroutines that sleep on a timer queue
// of the agent's, on `options.clock` (a FakeClock in tests: a round runs
// when the test moves the clock), and await the table and the probes; no
// thread ever blocks on the network.
//
// Threading: thread-safe. The coroutines resume on the agent's timer
// thread, or on the table's and the transport's threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/sleeper.h"
#include "core/sync.h"
#include "core/task.h"
#include "core/timer_queue.h"
#include "granary/v1/cluster.pb.h"
#include "silo/cluster/transport.h"
#include "storage/membership_table.h"

namespace granary::silo {

// Live silos with a stale heartbeat that one round probes beyond its
// ring neighbours (silo/cluster/membership_agent.cc, ProbeRound).
inline constexpr size_t kMaxStaleProbes = 32;
// The highest local health score (see above): probes then wait up to
// (1 + kMaxHealthScore) x probe_timeout.
inline constexpr int kMaxHealthScore = 8;
// Timeouts of one peer excused in a row before they count as misses.
inline constexpr int kMaxExcusedTimeouts = 4;
// CPU pressure (core/process_load.h CpuPressure, percent) from which a
// prober counts as starved.
inline constexpr double kStarvedCpuPressure = 50;

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
  // How often this silo's load (SetLoadSource) reaches a table that records
  // heartbeats without a new version (PostgreSQL): its heartbeat is then
  // written this often when that is more often than heartbeat_period. A
  // table without such a write gets the load with each heartbeat.
  absl::Duration load_period = absl::Seconds(1);
  // The silo endpoint that hosts the table (a dev cluster's primary): never
  // voted dead, since nobody could record anything without it anyway.
  std::string table_host;
  // This silo's CPU pressure now (CpuPressure; nullopt: not known), read
  // each probe round for the local health score; nullptr: not read.
  std::function<std::optional<double>()> cpu_pressure;
  // Time of rounds, heartbeats, votes and the lease's re-reads; nullptr:
  // the system clock.
  Clock* clock = nullptr;
  // The silo's timer thread (on `clock`); null: one of the agent's own.
  std::shared_ptr<TimerThread> timer_thread;
  // The membership lease (zero: none). The agent reads its own row
  // (MembershipTable::ReadRow) every lease / 3; a read sent at time S that
  // shows this silo alive (and not Dead) holds it until S + lease. Shorter than
  // the quickest the others can declare this silo dead (SafeLease), so once a
  // silo cut off from the table stops running grain code, no other silo has
  // activated its grains yet.
  absl::Duration lease = absl::ZeroDuration();

  // The table's rules for these votes: a silo silent for three heartbeat
  // periods no longer counts as a possible voter.
  storage::VoteRules vote_rules() const {
    return storage::VoteRules{votes_to_kill, vote_expiry, 3 * heartbeat_period,
                              clock};
  }
};

// The longest lease `o` allows, with a margin: 80 % of the quickest death
// declaration ((missed_probes - 1) x probe_interval + probe_timeout).
absl::Duration SafeLease(const MembershipOptions& o);

// INVALID_ARGUMENT naming the option that is out of range.
absl::Status ValidateMembershipOptions(const MembershipOptions& o);

class MembershipAgent {
 public:
  // `self` names this silo (address, generation, gateway, http); its status
  // is set by the agent. Probes go through `transport` (nullptr: a silo
  // alone, which probes nobody). `activations` is read for each heartbeat.
  MembershipAgent(storage::MembershipTable* table, Transport* transport,
                  v1::Member self, MembershipOptions options,
                  std::function<int64_t()> activations = nullptr);
  ~MembershipAgent();  // Stop()
  MembershipAgent(const MembershipAgent&) = delete;
  MembershipAgent& operator=(const MembershipAgent&) = delete;

  // Runs once this silo is declared Dead (on one of the agent's threads).
  void SetDeclaredDeadHandler(std::function<void()> fn);
  // With a lease (MembershipOptions::lease), called with the time on the
  // agent's clock (ClockNanos: MonoNanos with the system clock) until which
  // this silo is confirmed a member, each time the lease is renewed; set
  // before Start.
  void SetLeaseListener(std::function<void(int64_t until_ns)> fn);
  // Called with every newer view this agent adopts, in version order (never
  // concurrently); it must not block.
  void SetViewListener(std::function<void(const v1::MembershipView&)> fn);
  // Called with each view read again at the version already adopted, whose
  // rows may carry newer heartbeats and loads (never concurrently with the
  // view listener); it must not block.
  void SetLoadListener(std::function<void(const v1::MembershipView&)> fn);
  // What each heartbeat (and each status write) reports as this silo's
  // load; set before Join.
  void SetLoadSource(std::function<v1::SiloLoad()> fn);

  // Writes this silo as Joining, then Active, retrying while the table is
  // UNAVAILABLE. UNAVAILABLE when it cannot be reached within `timeout`.
  Task<absl::Status> JoinAsync(absl::Duration timeout);
  // The same, waiting on this thread (not a coroutine of the runtime).
  absl::Status Join(absl::Duration timeout = absl::Seconds(30));
  // Starts the rounds (probes, votes, heartbeats, re-reads) and the lease.
  absl::Status Start();
  // A view pushed by the table (watch or subscription); older ones are
  // ignored.
  void OnView(const v1::MembershipView& view);
  // Marks this silo ShuttingDown (call before deactivating grains).
  void BeginLeave();
  // Stops the rounds, then marks this silo Dead.
  void Leave();
  // Ends the rounds and waits for them. Idempotent.
  void Stop();

  v1::MembershipView view() const;
  const std::string& id() const { return id_; }
  // Probes this agent sent that failed, votes it wrote, and rounds it ran.
  uint64_t probes_missed() const { return probes_missed_.load(); }
  // Probes that timed out while this silo was itself late (not misses).
  uint64_t probes_excused() const { return probes_excused_.load(); }
  // The local health score: 0 healthy, up to kMaxHealthScore.
  int health_score() const { return health_.load(); }
  uint64_t votes_cast() const { return votes_cast_.load(); }
  uint64_t rounds() const { return rounds_.load(); }

 private:
  Task<void> Rounds();
  Task<void> LeaseRounds();
  // One round: a re-read when no view came lately, a heartbeat when due,
  // probes and votes. False when this silo was declared dead.
  Task<bool> Round();
  Task<void> Refresh();
  // Writes `mutate(row)` of member `id` with compare-and-swap retries.
  // `mutate` sees the view just read and the row to change.
  Task<absl::Status> Update(
      std::string id,
      std::function<bool(const v1::MembershipView&, v1::Member*)> mutate);
  Task<absl::Status> WriteSelf(v1::MemberStatus status);
  Task<void> ProbeRound();
  enum class Outcome { kAnswered, kRefused, kTimedOut };
  struct ProbeResult {
    Outcome outcome = Outcome::kRefused;
    absl::Duration took;
    absl::Status why;  // of a miss
  };
  Task<ProbeResult> Probe(const v1::Member& target, absl::Duration timeout);
  // Moves the health score after a round (see the file comment).
  void UpdateHealth(bool slow, absl::Duration lag, absl::Duration slowest,
                    double pressure);
  // `why`: the last probe's failure, for the log.
  Task<void> Vote(std::string target_id, absl::Status why);
  // Runs `task` to its end on this thread.
  static absl::Status Wait(Task<absl::Status> task);
  bool declared_dead() const {
    MutexLock lock(&mu_);
    return declared_dead_;
  }
  absl::Time Now() const { return clock_->Now(); }

  storage::MembershipTable* const table_;
  Transport* const transport_;
  const MembershipOptions options_;
  Clock* const clock_;
  const std::function<int64_t()> activations_;
  v1::Member self_;
  const std::string id_;

  mutable Mutex mu_;
  v1::MembershipView view_ ABSL_GUARDED_BY(mu_);
  Mutex listener_mu_;
  std::function<void(const v1::MembershipView&)> listener_
      ABSL_GUARDED_BY(listener_mu_);
  std::function<void(const v1::MembershipView&)> load_listener_
      ABSL_GUARDED_BY(listener_mu_);
  std::function<v1::SiloLoad()> load_;  // set before Join
  int64_t notified_version_ ABSL_GUARDED_BY(listener_mu_) = -1;
  absl::Time viewed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool declared_dead_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_dead_ ABSL_GUARDED_BY(mu_);
  std::function<void(int64_t)> on_lease_;  // set before Start

  // The rounds' coroutine only (one step at a time).
  std::map<std::string, int> misses_;
  std::map<std::string, int> excused_;  // timeouts excused in a row
  absl::Duration round_lag_;            // how late the running round started
  absl::Time last_heartbeat_ = absl::InfinitePast();
  // The table has a heartbeat write that keeps the version (until it
  // answers UNIMPLEMENTED): heartbeats then go every load_period.
  bool heartbeat_write_ = true;

  // Until when (ClockNanos) the lease holds; no lease: forever.
  std::atomic<int64_t> lease_until_ns_{INT64_MAX};
  std::atomic<uint64_t> probes_missed_{0};
  std::atomic<uint64_t> probes_excused_{0};
  std::atomic<int> health_{0};
  std::atomic<uint64_t> votes_cast_{0};
  std::atomic<uint64_t> rounds_{0};

  TimerQueue timers_;
  Sleeper sleeper_;        // the rounds'
  Sleeper lease_sleeper_;  // the lease's
  absl::Status StartTimers();
  bool timers_started_ = false;  // Join, Start and Stop run on one thread
  bool started_ = false;
  Notification rounds_done_;
  Notification lease_done_;
};

}  // namespace granary::silo
