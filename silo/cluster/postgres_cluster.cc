#include "silo/cluster/postgres_cluster.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/detach.h"
#include "core/log.h"
#include "core/sleeper.h"
#include "core/status.h"
#include "core/sync.h"
#include "grpcpp/grpcpp.h"
#include "silo/cluster/reminder_remote.h"
#include "silo/runtime/runtime.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
#include "storage/postgres/postgres_membership_table.h"
#include "storage/postgres/schema.h"

namespace granary::silo {
namespace {

class PostgresCluster final : public ClusterProvider {
 public:
  PostgresCluster(const PostgresClusterOptions& o,
                  std::unique_ptr<storage::PgPool> pool)
      : options_(o),
        pool_(std::move(pool)),
        table_(pool_.get(), o.cluster_id, o.dead_retention, o.vote_rules) {}
  ~PostgresCluster() override {
    StopWatch();
    pool_->Stop();
  }

  bool clustered() const override { return true; }
  // Each silo schedules its range's reminders, reached at its endpoint.
  bool needs_silo_endpoint() const override { return true; }
  bool reminders_by_range() const override { return true; }
  storage::MembershipTable* table() override { return &table_; }

  void AddServices(grpc::ServerBuilder* builder,
                   storage::GrainStorage*) override {
    builder->RegisterService(&reminders_);
  }
  void OnSiloStarted(Runtime* silo) override { reminders_.Attach(silo); }
  void SetGrainHostCheck(GrainHostCheck check) override {
    reminders_.SetHostCheck(std::move(check));
  }

  void Watch(TimerQueue* timers,
             std::function<void(const v1::MembershipView&)> fn) override {
    sleeper_ = std::make_unique<Sleeper>(timers);
    clock_ = timers->clock();
    stop_listening_ = false;
    listener_ = std::thread([this, fn] { Listen(fn); });
    Detach(Poll(std::move(fn)), [this](absl::Status) { done_.Notify(); });
  }
  void StopWatch() override {
    if (sleeper_ == nullptr) return;
    stop_listening_ = true;
    if (listener_.joinable()) listener_.join();
    sleeper_->Wake();
    done_.WaitForNotification();
    sleeper_.reset();
  }

 private:
  // Reads the table every poll_interval; passes on newer versions, and the
  // same version again (its rows' heartbeats and loads move without it).
  Task<void> Poll(std::function<void(const v1::MembershipView&)> fn) {
    int64_t seen = -1;
    bool failing = false;
    while (true) {
      absl::StatusOr<v1::MembershipView> view = co_await table_.Read();
      if (view.ok()) {
        if (failing) {
          GRANARY_LOG(kInfo) << "the membership table is reachable again";
        }
        failing = false;
        if (view->version() >= seen) {
          seen = view->version();
          fn(*view);
        }
      } else if (!failing) {
        failing = true;
        GRANARY_LOG(kWarning)
            << "cannot read the membership table: " << view.status()
            << " (logged once until it "
            << "is readable again)";
      }
      if (!co_await sleeper_->Until(clock_->Now() + options_.poll_interval)) {
        co_return;
      }
    }
  }

  // LISTENs on the table's channel from a connection of its own and reads
  // the table as soon as a write of this cluster commits (and once each
  // time it starts listening, for the writes it may have missed), so a
  // change reaches this silo within one round trip rather than a poll.
  // Reconnects after a second when the connection is lost.
  void Listen(const std::function<void(const v1::MembershipView&)>& fn) {
    bool failing = false;
    while (!stop_listening_) {
      absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
          storage::PgConnection::Connect(options_.conninfo, absl::Seconds(5));
      absl::Status s =
          db.ok() ? (*db)->Listen(storage::kMembershipChannel) : db.status();
      bool changed = true;  // read once now that it listens
      while (s.ok() && !stop_listening_) {
        if (changed) {
          changed = false;
          Task<absl::StatusOr<v1::MembershipView>> read = table_.Read();
          absl::StatusOr<v1::MembershipView> view =
              Flatten(std::move(read).Get());
          if (view.ok()) fn(*view);
        }
        absl::StatusOr<std::vector<std::string>> payloads =
            (*db)->AwaitNotifications(absl::Milliseconds(200));
        s = payloads.status();
        if (s.ok()) {
          changed = std::find(payloads->begin(), payloads->end(),
                              options_.cluster_id) != payloads->end();
        }
      }
      if (stop_listening_) return;
      if (!failing) {
        failing = true;
        GRANARY_LOG(kWarning)
            << "cannot listen for membership changes: " << s
            << " (the table is still read every "
            << absl::FormatDuration(options_.poll_interval)
            << "; retrying, logged once until it listens again)";
      }
      for (int i = 0; i < 5 && !stop_listening_; ++i) {
        absl::SleepFor(absl::Milliseconds(200));
      }
    }
  }

  const PostgresClusterOptions options_;
  std::unique_ptr<storage::PgPool> pool_;
  storage::PostgresMembershipTable table_;
  ReminderPeerService reminders_;
  std::unique_ptr<Sleeper> sleeper_;
  Clock* clock_ = nullptr;
  Notification done_;
  std::atomic<bool> stop_listening_{false};
  std::thread listener_;
};

}  // namespace

absl::Status OpenPostgres(const std::string& conninfo, absl::Duration wait) {
  GRANARY_RETURN_IF_ERROR(storage::ValidateConninfo(conninfo));
  const absl::Time give_up = absl::Now() + wait;
  absl::Duration pause = absl::Milliseconds(100);
  bool logged = false;
  while (true) {
    const absl::Duration left = give_up - absl::Now();
    absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
        storage::PgConnection::Connect(
            conninfo, std::clamp(left, absl::Seconds(1), absl::Seconds(5)));
    if (db.ok()) return storage::CheckSchema(**db);
    if (db.status().code() != absl::StatusCode::kUnavailable) {
      return db.status();
    }
    if (absl::Now() >= give_up) {
      return absl::UnavailableError(absl::StrCat(
          "cannot reach PostgreSQL (", storage::RedactConninfo(conninfo),
          ") within --join_timeout=", absl::FormatDuration(wait), ": ",
          db.status().message()));
    }
    if (!logged) {
      logged = true;
      GRANARY_LOG(kWarning)
          << "waiting for PostgreSQL (" << storage::RedactConninfo(conninfo)
          << "): " << db.status().message();
    }
    // The last attempt is made at the deadline.
    absl::SleepFor(std::min(pause, give_up - absl::Now()));
    pause = std::min(pause * 2, absl::Seconds(2));
  }
}

absl::StatusOr<std::unique_ptr<ClusterProvider>> MakePostgresClusterProvider(
    const PostgresClusterOptions& o) {
  GRANARY_RETURN_IF_ERROR(storage::ValidateClusterId(o.cluster_id));
  if (o.dead_retention < absl::Minutes(1)) {
    return absl::InvalidArgumentError("--dead_retention must be at least 1m");
  }
  GRANARY_RETURN_IF_ERROR(OpenPostgres(o.conninfo, o.wait));
  storage::PgPoolOptions pool;
  pool.conninfo = o.conninfo;
  pool.connections = 2;  // the watch, and the agent's writes and lease
  pool.max_queued = 1000;
  auto p = std::make_unique<storage::PgPool>(pool);
  GRANARY_RETURN_IF_ERROR(p->Start());
  GRANARY_LOG(kInfo) << "cluster=" << o.cluster_id << " membership in "
                     << "PostgreSQL (" << storage::RedactConninfo(o.conninfo)
                     << ")";
  return std::unique_ptr<ClusterProvider>(
      std::make_unique<PostgresCluster>(o, std::move(p)));
}

}  // namespace granary::silo
