#include "silo/cluster/dev_cluster.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "grpcpp/grpcpp.h"
#include "silo/cluster/membership_service.h"
#include "silo/cluster/reminder_remote.h"
#include "silo/cluster/storage_service.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {
namespace {

// `local`, and the primary of a `dev` cluster.
class InMemoryCluster final : public ClusterProvider {
 public:
  InMemoryCluster(bool serve, const storage::VoteRules& vote_rules,
                  absl::Duration dead_retention)
      : serve_(serve), table_(vote_rules, dead_retention) {}
  ~InMemoryCluster() override { StopWatch(); }

  bool clustered() const override { return serve_; }
  bool needs_silo_endpoint() const override { return serve_; }
  storage::MembershipTable* table() override { return &table_; }

  void AddServices(grpc::ServerBuilder* builder,
                   storage::GrainStorage* local) override {
    if (!serve_) return;
    membership_ = std::make_unique<MembershipService>(&table_);
    state_ = std::make_unique<StorageService>(local);
    builder->RegisterService(membership_.get());
    builder->RegisterService(state_.get());
    builder->RegisterService(&reminders_);
  }

  void OnSiloStarted(Runtime* silo) override {
    if (!serve_) return;
    // Only the grain types this silo knows may be stored or reminded (the
    // silos of the cluster may host some it does not: --grain_types).
    std::vector<std::string> types;
    for (const GrainClassInfo* t : silo->KnownTypes()) {
      types.emplace_back(t->interface->type_name);
    }
    state_->AllowTypes(types);
    reminders_.Attach(silo);
  }
  void SetGrainHostCheck(GrainHostCheck check) override {
    if (!serve_) return;
    state_->SetHostCheck(check);
    reminders_.SetHostCheck(std::move(check));
  }

  void Watch(TimerQueue*,
             std::function<void(const v1::MembershipView&)> fn) override {
    subscription_ = table_.Subscribe(std::move(fn));
  }
  void StopWatch() override {
    if (subscription_ != 0) table_.Unsubscribe(std::exchange(subscription_, 0));
  }

 private:
  const bool serve_;
  storage::InMemoryMembershipTable table_;
  std::unique_ptr<MembershipService> membership_;
  std::unique_ptr<StorageService> state_;
  ReminderPeerService reminders_;
  int subscription_ = 0;
};

// A member of a `dev` cluster other than its primary.
class RemoteCluster final : public ClusterProvider {
 public:
  RemoteCluster(const std::string& primary, const rpc::ClientSecurity& security)
      : table_(primary, absl::Seconds(2), security),
        storage_(primary, absl::Seconds(10), security),
        reminders_(primary, absl::Seconds(10), security) {}
  ~RemoteCluster() override { StopWatch(); }

  bool clustered() const override { return true; }
  bool needs_silo_endpoint() const override { return true; }
  storage::MembershipTable* table() override { return &table_; }
  storage::GrainStorage* grain_storage(storage::GrainStorage*) override {
    return &storage_;
  }
  ReminderKeeper* reminder_keeper() override { return &reminders_; }
  void Watch(TimerQueue* timers,
             std::function<void(const v1::MembershipView&)> fn) override {
    table_.Watch(timers, std::move(fn));
  }
  void StopWatch() override { table_.StopWatch(); }

 private:
  RemoteMembershipTable table_;
  RemoteGrainStorage storage_;
  RemoteReminders reminders_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterProvider>> MakeDevClusterProvider(
    const std::string& kind, const std::string& primary,
    const rpc::ClientSecurity& security, const storage::VoteRules& vote_rules,
    absl::Duration dead_retention) {
  if (kind != "local" && kind != "dev") {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster provider '", kind, "' is not local or dev"));
  }
  if (kind == "local" && !primary.empty()) {
    return absl::InvalidArgumentError("--primary needs --cluster=dev");
  }
  std::string host;
  int port = 0;
  if (!primary.empty() && !SplitHostPort(primary, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--primary='", primary, "' is not HOST:PORT"));
  }
  if (primary.empty()) {
    return std::unique_ptr<ClusterProvider>(std::make_unique<InMemoryCluster>(
        /*serve=*/kind == "dev", vote_rules, dead_retention));
  }
  return std::unique_ptr<ClusterProvider>(
      std::make_unique<RemoteCluster>(primary, security));
}

}  // namespace granary::silo
