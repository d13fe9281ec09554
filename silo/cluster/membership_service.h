// File: silo/cluster/membership_service.h
// -----------------------------------------------------------------------------
// The gRPC services of the silo endpoint for the cluster:
//   granary.v1.Membership  - the table, served by a `dev` cluster's primary
//                            from its InMemoryMembershipTable
//   granary.v1.SiloControl - liveness probes, answered by every silo
// and the client side of Membership for the other silos.
//
//   MembershipService table_service(&table);          // primary only
//   SiloControlService control(my_id);
//   builder.RegisterService(&table_service); builder.RegisterService(&control);
//
//   RemoteMembershipTable remote(channel_to_primary);  // everyone else
//   remote.Watch(&timers,
//                [&](const v1::MembershipView& v) { agent.OnView(v); });
//
// Threading: thread-safe. RemoteMembershipTable's Read and Write are
// awaitable gRPC calls (the awaiter resumes on a gRPC thread); Watch is a
// gRPC callback stream whose views arrive on gRPC threads, one at a time.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/sync.h"
#include "core/timer_queue.h"
#include "granary/v1/cluster.grpc.pb.h"
#include "rpc/credentials.h"
#include "rpc/security.h"
#include "storage/membership_table.h"

namespace granary::silo {

// Whether a silo speaking for `peer` may write `next` into `view`: its own
// rows (a new one only as Joining), and on another silo's row nothing but
// its own suspicion votes (dropping expired ones) and, with them, the
// status Dead. PERMISSION_DENIED saying what was refused otherwise.
absl::Status AuthorizeMemberWrite(const rpc::PeerAuthority& peer,
                                  const v1::MembershipView& view,
                                  const v1::Member& next);

// Serves the table to the other silos; writes pass AuthorizeMemberWrite.
class MembershipService final : public v1::Membership::CallbackService {
 public:
  explicit MembershipService(storage::InMemoryMembershipTable* table)
      : table_(table) {}

  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* context,
                                 const v1::ReadMembershipRequest* request,
                                 v1::MembershipView* reply) override;
  grpc::ServerUnaryReactor* Write(grpc::CallbackServerContext* context,
                                  const v1::WriteMemberRequest* request,
                                  v1::WriteMemberReply* reply) override;
  grpc::ServerWriteReactor<v1::MembershipView>* Watch(
      grpc::CallbackServerContext* context,
      const v1::WatchMembershipRequest* request) override;

 private:
  storage::InMemoryMembershipTable* const table_;
};

class SiloControlService final : public v1::SiloControl::CallbackService {
 public:
  // Probes are answered UNAVAILABLE until the silo's id is set (it carries
  // the port, known only once the endpoint is bound).
  void set_id(std::string id) {
    MutexLock lock(&mu_);
    id_ = std::move(id);
  }
  // While `health` answers an error, probes are answered with it (the
  // probers count a miss): a silo that cannot run grain code (its lease
  // lapsed: it cannot reach the membership table) is not a live silo.
  void set_health(std::function<absl::Status()> health) {
    MutexLock lock(&mu_);
    health_ = std::move(health);
  }
  // Who takes activations other silos migrate here (Runtime::
  // AcceptMigration); unset, they are refused UNAVAILABLE.
  using Migrations = std::function<void(
      const v1::MigrationRequest&,
      std::function<void(absl::StatusOr<v1::MigrationReply>)>)>;
  void set_migrations(Migrations fn) {
    MutexLock lock(&mu_);
    migrations_ = std::move(fn);
  }
  grpc::ServerUnaryReactor* Probe(grpc::CallbackServerContext* context,
                                  const v1::ProbeRequest* request,
                                  v1::ProbeReply* reply) override;
  grpc::ServerUnaryReactor* AcceptMigration(
      grpc::CallbackServerContext* context, const v1::MigrationRequest* request,
      v1::MigrationReply* reply) override;

 private:
  Mutex mu_;
  std::string id_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status()> health_ ABSL_GUARDED_BY(mu_);
  Migrations migrations_ ABSL_GUARDED_BY(mu_);
};

class RemoteMembershipTable final : public storage::MembershipTable {
 public:
  // `primary` is the primary silo's endpoint, HOST:PORT.
  // `security`: what this silo presents to the primary and trusts in it.
  explicit RemoteMembershipTable(const std::string& primary,
                                 absl::Duration timeout = absl::Seconds(2),
                                 const rpc::ClientSecurity& security = {});
  ~RemoteMembershipTable() override;

  Task<absl::StatusOr<v1::MembershipView>> Read() override;
  Task<absl::StatusOr<int64_t>> Write(v1::Member member,
                                      int64_t expected_version) override;

  // How long a watch that ended before its first view waits before the
  // next attempt (on `timers` of Watch).
  static constexpr absl::Duration kWatchRetryPause = absl::Milliseconds(500);

  // Streams every newer view to `fn` (on a gRPC thread, one at a time),
  // reconnecting after a failure: at once when the stream had delivered a
  // view (the new one waits for the primary to be reachable), else after
  // kWatchRetryPause on `timers`, which must outlive the watch. One watch
  // per table; StopWatch (or the destructor) ends it.
  void Watch(TimerQueue* timers,
             std::function<void(const v1::MembershipView&)> fn);
  // Idempotent; no callback runs once it returns.
  void StopWatch();

 private:
  class WatchStream;
  struct ReconnectTimer final : TimerEntry {
    explicit ReconnectTimer(RemoteMembershipTable* t) : table(t) {}
    void OnTimer() override;
    RemoteMembershipTable* const table;
  };

  void OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(const v1::MembershipView& view);
  void StreamEnded(WatchStream* stream, const grpc::Status& status,
                   bool delivered);

  const absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Membership::Stub> stub_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  WatchStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool reconnect_pending_ ABSL_GUARDED_BY(mu_) = false;
  TimerQueue* timers_ ABSL_GUARDED_BY(mu_) = nullptr;  // set by Watch
  ReconnectTimer reconnect_{this};
  // Taken after mu_ when both are; fn_ runs under it (one view at a time).
  Mutex deliver_mu_;
  std::function<void(const v1::MembershipView&)> fn_
      ABSL_GUARDED_BY(deliver_mu_);
  int64_t seen_ ABSL_GUARDED_BY(deliver_mu_) = 0;
};

}  // namespace granary::silo
