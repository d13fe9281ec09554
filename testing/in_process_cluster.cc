#include "testing/in_process_cluster.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/member.h"
#include "silo/cluster/cluster_provider.h"
#include "silo/cluster/membership_agent.h"
#include "storage/memory_storage.h"
#include "testing/loopback_reminders.h"

namespace granary::testing {
namespace {

// A silo's way to the shared membership table, which a test can cut
// (InProcessCluster::CutFromTable): cut, every read and write fails
// UNAVAILABLE, as they would over a partitioned network.
class TableLink final : public storage::MembershipTable {
 public:
  TableLink(storage::InMemoryMembershipTable* table,
            const std::atomic<bool>* cut)
      : table_(table), cut_(cut) {}

  Task<absl::StatusOr<v1::MembershipView>> Read() override {
    if (cut_->load()) co_return Unreachable();
    co_return co_await table_->Read();
  }
  Task<absl::StatusOr<int64_t>> Write(v1::Member member,
                                      int64_t expected_version) override {
    if (cut_->load()) co_return Unreachable();
    co_return co_await table_->Write(std::move(member), expected_version);
  }
  Task<absl::Status> Heartbeat(v1::Member member) override {
    if (cut_->load()) co_return Unreachable();
    co_return co_await table_->Heartbeat(std::move(member));
  }

 private:
  static absl::Status Unreachable() {
    return absl::UnavailableError("the membership table is unreachable");
  }
  storage::InMemoryMembershipTable* const table_;
  const std::atomic<bool>* const cut_;
};

// The cluster provider of an in-process cluster: its silos share one
// membership table, whose changes reach them as they are written (none
// while the silo is cut from the table; it finds the changes it missed at
// its next read).
class SharedTableCluster final : public silo::ClusterProvider {
 public:
  SharedTableCluster(storage::InMemoryMembershipTable* table,
                     const std::atomic<bool>* cut)
      : table_(table), cut_(cut), link_(table, cut) {}
  ~SharedTableCluster() override { StopWatch(); }

  bool clustered() const override { return true; }
  // Each silo schedules the reminders of its range (LoopbackReminders).
  bool reminders_by_range() const override { return true; }
  storage::MembershipTable* table() override { return &link_; }
  void Watch(TimerQueue* /*timers*/,
             std::function<void(const v1::MembershipView&)> fn) override {
    StopWatch();
    subscription_ = table_->Subscribe(
        [cut = cut_, fn = std::move(fn)](const v1::MembershipView& view) {
          if (!cut->load()) fn(view);
        });
    watching_ = true;
  }
  void StopWatch() override {
    if (!watching_) return;
    watching_ = false;
    table_->Unsubscribe(subscription_);
  }

 private:
  storage::InMemoryMembershipTable* const table_;
  const std::atomic<bool>* const cut_;
  TableLink link_;
  int subscription_ = 0;
  bool watching_ = false;
};

}  // namespace

silo::SiloHostOptions InProcessClusterOptions::DefaultHostOptions() {
  silo::SiloHostOptions o;
  o.gateway = "";
  o.http = "";
  o.cluster = "in-process";
  o.storage = "in-process";
  o.workers = 2;
  o.idle_spin = 0;
  o.shutdown_timeout = absl::Seconds(6);
  return o;
}

InProcessCluster::InProcessCluster(InProcessClusterOptions options)
    : options_(std::move(options)),
      membership_([this] {
        silo::MembershipOptions m;
        m.probe_interval = options_.host.probe_interval;
        m.probe_timeout = options_.host.probe_timeout;
        m.missed_probes = options_.host.missed_probes;
        m.votes_to_kill = options_.host.votes_to_kill;
        m.clock = &clock_;
        return m;
      }()),
      // The table judges votes by the silos' clock and rules.
      table_(membership_.vote_rules()) {
  // One grain store and reminder table for the whole cluster, as a shared
  // database would be: a grain that moves keeps its state.
  state_ = std::make_shared<storage::MemoryStorage>();
  reminders_ = std::make_shared<storage::MemoryReminderTable>();
  for (int i = 0; i < options_.silos; ++i) nodes_.push_back(MakeNode(i, 1));
}

std::unique_ptr<InProcessCluster::Node> InProcessCluster::MakeNode(
    int i, int generation) {
  auto state = state_;
  auto reminders = reminders_;
  {
    auto node = std::make_unique<Node>();
    node->address = absl::StrCat("10.0.0.", i + 1, ":11111");
    node->id = absl::StrCat(node->address, "@", generation);
    Node* raw = node.get();
    silo::SiloEnvironment env;
    env.clock = &clock_;
    env.in_process = silo::InProcessNetwork();
    env.in_process->id = node->id;
    env.in_process->attach =
        [this](const std::string& id, const std::string& address,
               silo::Runtime* silo, directory::DirectoryPartition* partition) {
          net_.Attach(id, address, silo, partition);
        };
    env.in_process->detach = [this](const std::string& id) { net_.Detach(id); };
    env.in_process->transport = [this](const std::string& id) {
      return std::make_unique<LoopbackTransport>(&net_, id);
    };
    env.in_process->reminders =
        [this, id = node->id](std::function<std::string(const GrainId&)> owner)
        -> std::unique_ptr<silo::ReminderKeeper> {
      return std::make_unique<LoopbackReminders>(&net_, id, std::move(owner));
    };
    env.providers.cluster["in-process"] = [this,
                                           raw](const silo::SiloHostOptions&)
        -> absl::StatusOr<std::unique_ptr<silo::ClusterProvider>> {
      return std::make_unique<SharedTableCluster>(&table_, &raw->table_cut);
    };
    env.providers.storage["in-process"] =
        [state, reminders](const silo::SiloHostOptions&)
        -> absl::StatusOr<silo::StorageStores> {
      return silo::StorageStores{state, reminders};
    };
    silo::SiloHostOptions host_options = options_.host;
    if (options_.configure) options_.configure(i, host_options);
    host_options.on_declared_dead = [raw] { raw->declared_dead = true; };
    node->host = std::make_unique<silo::SiloHost>(host_options, std::move(env));
    if (options_.grains) options_.grains(*node->host);
    return node;
  }
}

absl::Status InProcessCluster::Replace(int i) {
  Node& old = *nodes_[i];
  if (old.running) StopSilo(i);
  const int generation = old.generation + 1;
  // The old host goes first: its id leaves the loopback network.
  nodes_[i]->host.reset();
  nodes_[i] = MakeNode(i, generation);
  nodes_[i]->generation = generation;
  GRANARY_RETURN_IF_ERROR(nodes_[i]->host->Start());
  nodes_[i]->running = true;
  if (!WaitForViews()) {
    return absl::DeadlineExceededError("the silos did not see the new one");
  }
  if (!Settle()) {
    return absl::DeadlineExceededError("the rebuild reports did not settle");
  }
  return absl::OkStatus();
}

InProcessCluster::~InProcessCluster() { Stop(); }

absl::Status InProcessCluster::Start() {
  if (started_) return absl::FailedPreconditionError("started already");
  started_ = true;
  GRANARY_RETURN_IF_ERROR(net_.Start());
  for (auto& node : nodes_) {
    GRANARY_RETURN_IF_ERROR(node->host->Start());
    node->running = true;
  }
  if (!WaitForViews()) {
    return absl::DeadlineExceededError(
        "the silos did not all see the cluster's view");
  }
  if (!Settle()) {
    return absl::DeadlineExceededError(
        "the silos' rebuild reports did not all reach their owners");
  }
  return absl::OkStatus();
}

void InProcessCluster::Stop() {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[i]->running) StopSilo(i);
  }
  net_.Stop();
}

int InProcessCluster::IndexOf(const std::string& id) const {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[i]->id == id) return i;
  }
  return -1;
}

bool InProcessCluster::declared_dead(int i) const {
  return nodes_[i]->declared_dead.load();
}

bool InProcessCluster::dead_in_table(int i) const {
  const v1::MembershipView view = table_.Snapshot();
  for (const v1::Member& m : view.members()) {
    if (MemberId(m) == nodes_[i]->id) return m.status() == v1::MEMBER_DEAD;
  }
  return false;
}

void InProcessCluster::CutFromTable(int i) { nodes_[i]->table_cut = true; }

void InProcessCluster::HealTable(int i) { nodes_[i]->table_cut = false; }

void InProcessCluster::WriteStatus(int i, v1::MemberStatus status) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const v1::MembershipView view = table_.Snapshot();
    for (const v1::Member& m : view.members()) {
      if (MemberId(m) != nodes_[i]->id) continue;
      v1::Member row = m;
      row.set_status(status);
      absl::StatusOr<int64_t> written = table_.WriteNow(row, view.version());
      if (written.ok() || !absl::IsAborted(written.status())) return;
    }
  }
}

void InProcessCluster::Kill(int i) {
  Node& node = *nodes_[i];
  if (!node.running) return;
  node.running = false;
  net_.Detach(node.id);
  node.host->Halt();
  WriteStatus(i, v1::MEMBER_DEAD);
  (void)WaitForViews();
  // The others keep its grains' directory entries while it might still run
  // them (its lease): by the time votes declare a silo dead, that is over.
  const absl::Time past_lease =
      clock_.Now() + silo::SafeLease(membership_) + absl::Milliseconds(1);
  (void)AdvanceUntil([&] { return clock_.Now() >= past_lease; },
                     absl::Milliseconds(50));
}

void InProcessCluster::BeginLeave(int i) {
  WriteStatus(i, v1::MEMBER_SHUTTING_DOWN);
  (void)WaitForViews();
}

void InProcessCluster::StopSilo(int i) {
  Node& node = *nodes_[i];
  if (!node.running) return;
  node.running = false;
  WithClockMoving([&node] { node.host->Stop(); });
}

void InProcessCluster::WithClockMoving(const std::function<void()>& fn) {
  std::atomic<bool> done{false};
  std::thread mover([this, &done] {
    while (!done.load()) {
      clock_.Advance(absl::Milliseconds(10));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  fn();
  done = true;
  mover.join();
}

bool InProcessCluster::AdvanceUntil(const std::function<bool()>& done,
                                    absl::Duration step, int steps) {
  for (int i = 0; i < steps && !done(); ++i) {
    clock_.Advance(step);
    (void)WaitUntil(done, absl::Milliseconds(10));
  }
  return done();
}

bool InProcessCluster::Settle() {
  return AdvanceUntil([this] {
    for (const auto& node : nodes_) {
      if (!node->running) continue;
      silo::ClusterRouter* router = node->host->router();
      if (router->reported_ring() !=
          node->host->partition()->ring_fingerprint()) {
        return false;
      }
    }
    return true;
  });
}

bool InProcessCluster::WaitForViews(absl::Duration limit) {
  const int64_t version = table_.Snapshot().version();
  for (auto& node : nodes_) {
    if (!node->running) continue;
    if (!WaitUntil(
            [&] { return node->host->membership_view().version() >= version; },
            limit)) {
      return false;
    }
  }
  return true;
}

}  // namespace granary::testing
