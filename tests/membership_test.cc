// Cluster membership in one process over real gRPC on 127.0.0.1: silos join
// a primary's table (the others through RemoteMembershipTable and its
// watch), a silo that stops answering probes is voted dead, a silo cut off
// from the others' probes learns it was declared dead and stops, and a
// graceful leave marks the silo dead without votes.
#include <algorithm>
#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "core/timer_queue.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/callback_queue.h"
#include "silo/cluster/grpc_transport.h"
#include "silo/cluster/membership_agent.h"
#include "silo/cluster/membership_service.h"
#include "storage/membership_table.h"

using ::granary::matchers::StatusIs;

namespace granary::silo {
namespace {

MembershipOptions Fast() {
  MembershipOptions o;
  // A dead endpoint refuses at once, so detection stays fast; a slow probe
  // on a loaded machine does not count as missed for 2 s.
  o.probe_interval = absl::Milliseconds(100);
  o.probe_timeout = absl::Seconds(2);
  o.missed_probes = 3;
  o.votes_to_kill = 2;
  o.vote_expiry = absl::Seconds(20);
  // Long: views must arrive by push (subscription, Watch), not by re-reads.
  o.refresh_period = absl::Seconds(60);
  o.heartbeat_period = absl::Milliseconds(300);
  return o;
}

// One silo's membership side: its endpoint (probes; the table on the
// primary), its table access and its agent.
class TestSilo {
 public:
  TestSilo(storage::InMemoryMembershipTable* primary_table,
           const std::string& primary_address, int64_t generation) {
    rpc::HoldGrpcCallbackQueue();  // see rpc/callback_queue.h
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&control_);
    if (primary_table != nullptr) {
      service_ = std::make_unique<MembershipService>(primary_table);
      builder.RegisterService(service_.get());
    }
    server_ = builder.BuildAndStart();
    address_ = absl::StrCat("127.0.0.1:", port);
    v1::Member self;
    self.set_address(address_);
    self.set_generation(generation);
    self.set_gateway(absl::StrCat("127.0.0.1:", port + 1));
    control_.set_id(storage::MemberId(self));
    storage::MembershipTable* table = primary_table;
    if (primary_table == nullptr) {
      remote_ = std::make_unique<RemoteMembershipTable>(primary_address);
      table = remote_.get();
    }
    transport_ = std::make_unique<GrpcTransport>(
        storage::MemberId(self), std::vector<const InterfaceInfo*>{});
    agent_ = std::make_unique<MembershipAgent>(
        table, transport_.get(), self, Fast(),
        [this] { return activations_.fetch_add(1); });
    agent_->SetDeclaredDeadHandler([this] { declared_dead_.Notify(); });
    if (primary_table != nullptr) {
      subscription_ = primary_table->Subscribe(
          [this](const v1::MembershipView& v) { agent_->OnView(v); });
      table_ = primary_table;
    }
  }
  ~TestSilo() {
    if (table_ != nullptr) table_->Unsubscribe(subscription_);
    if (remote_ != nullptr) remote_->StopWatch();
    agent_.reset();
    if (server_ != nullptr) StopServing();
  }

  absl::Status Start() {
    GRANARY_RETURN_IF_ERROR(agent_->Join(absl::Seconds(10)));
    if (remote_ != nullptr) {
      GRANARY_RETURN_IF_ERROR(timers_.Start());
      remote_->Watch(
          &timers_, [this](const v1::MembershipView& v) { agent_->OnView(v); });
    }
    return agent_->Start();
  }
  // Stops answering anything (probes, and the table if it is the primary).
  void StopServing() {
    server_->Shutdown(absl::ToChronoTime(absl::Now()));
    server_->Wait();
    server_.reset();
  }
  // A crash: the agent stops without leaving.
  void Crash() {
    if (remote_ != nullptr) remote_->StopWatch();
    if (table_ != nullptr) {
      table_->Unsubscribe(subscription_);
      table_ = nullptr;
    }
    agent_.reset();
    StopServing();
  }

  MembershipAgent& agent() { return *agent_; }
  std::string id() const { return agent_->id(); }
  Notification& declared_dead() { return declared_dead_; }
  const std::string& address() const { return address_; }

 private:
  SiloControlService control_;
  std::unique_ptr<MembershipService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  TimerQueue timers_{Clock::System()};  // the watch's reconnect pauses
  std::unique_ptr<RemoteMembershipTable> remote_;
  std::unique_ptr<GrpcTransport> transport_;  // the agent's probes
  std::unique_ptr<MembershipAgent> agent_;
  storage::InMemoryMembershipTable* table_ = nullptr;
  int subscription_ = 0;
  Notification declared_dead_;
  std::atomic<int64_t> activations_{1};
};

v1::MemberStatus StatusIn(const v1::MembershipView& view,
                          const std::string& id) {
  for (const v1::Member& m : view.members()) {
    if (storage::MemberId(m) == id) return m.status();
  }
  return v1::MEMBER_STATUS_UNSPECIFIED;
}

// Waits until `pred()` holds; false after 30 s.
template <typename Pred>
bool Eventually(Pred pred) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return pred();
}

class MembershipTest : public ::testing::Test {
 protected:
  void StartCluster(int n) {
    primary_ = std::make_unique<TestSilo>(&table_, "", 1000);
    ASSERT_TRUE(primary_->Start().ok());
    for (int i = 1; i < n; ++i) {
      others_.push_back(
          std::make_unique<TestSilo>(nullptr, primary_->address(), 1000 + i));
      ASSERT_TRUE(others_.back()->Start().ok());
    }
  }
  void TearDown() override {
    others_.clear();
    primary_.reset();
  }
  std::vector<TestSilo*> All() {
    std::vector<TestSilo*> all = {primary_.get()};
    for (auto& s : others_) all.push_back(s.get());
    return all;
  }

  storage::InMemoryMembershipTable table_;
  std::unique_ptr<TestSilo> primary_;
  std::vector<std::unique_ptr<TestSilo>> others_;
};

TEST_F(MembershipTest, SilosJoinAndEveryoneSeesEveryoneActive) {
  StartCluster(3);
  for (TestSilo* viewer : All()) {
    EXPECT_TRUE(Eventually([&] {
      const v1::MembershipView v = viewer->agent().view();
      int active = 0;
      for (const v1::Member& m : v.members()) {
        if (m.status() == v1::MEMBER_ACTIVE) ++active;
      }
      return active == 3;
    })) << viewer->agent().view().ShortDebugString();
  }
  // Heartbeats keep coming, each with the activation count of its time.
  const v1::MembershipView first = table_.Snapshot();
  EXPECT_TRUE(Eventually([&] {
    const v1::MembershipView now = table_.Snapshot();
    for (int i = 0; i < now.members_size(); ++i) {
      if (now.members(i).heartbeat_unix_ms() <=
              first.members(i).heartbeat_unix_ms() ||
          now.members(i).activations() <= first.members(i).activations()) {
        return false;
      }
    }
    return true;
  }));
}

TEST_F(MembershipTest, ACrashedSiloIsVotedDeadBySurvivors) {
  StartCluster(3);
  TestSilo* victim = others_[1].get();
  const std::string victim_id = victim->id();
  ASSERT_TRUE(Eventually([&] {
    return StatusIn(others_[0]->agent().view(), victim_id) == v1::MEMBER_ACTIVE;
  }));
  const absl::Time crashed = absl::Now();
  victim->Crash();
  ASSERT_TRUE(Eventually([&] {
    return StatusIn(table_.Snapshot(), victim_id) == v1::MEMBER_DEAD;
  }));
  const absl::Duration detection = absl::Now() - crashed;
  // Every survivor learns it, by push.
  for (TestSilo* s : {primary_.get(), others_[0].get()}) {
    EXPECT_TRUE(Eventually([&] {
      return StatusIn(s->agent().view(), victim_id) == v1::MEMBER_DEAD;
    }));
    EXPECT_FALSE(s->declared_dead().HasBeenNotified());
  }
  const v1::MembershipView snap = table_.Snapshot();
  for (const v1::Member& m : snap.members()) {
    if (storage::MemberId(m) == victim_id) {
      EXPECT_EQ(m.suspicions_size(), 2);
    }
  }
  std::cout << "detected a crash in " << absl::FormatDuration(detection)
            << " (probe interval 100ms, 3 missed probes, 2 votes)\n";
}

TEST_F(MembershipTest, ASiloCutOffFromProbesLearnsItIsDeadAndStops) {
  StartCluster(3);
  TestSilo* cut = others_[1].get();
  const std::string cut_id = cut->id();
  ASSERT_TRUE(Eventually([&] {
    return StatusIn(table_.Snapshot(), cut_id) == v1::MEMBER_ACTIVE;
  }));
  // Its endpoint goes dark, but it still reaches the table.
  cut->StopServing();
  EXPECT_TRUE(
      cut->declared_dead().WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(StatusIn(table_.Snapshot(), cut_id), v1::MEMBER_DEAD);
  EXPECT_FALSE(primary_->declared_dead().HasBeenNotified());
  EXPECT_FALSE(others_[0]->declared_dead().HasBeenNotified());
}

TEST_F(MembershipTest, AGracefulLeaveMarksTheSiloDeadWithoutVotes) {
  StartCluster(3);
  TestSilo* leaver = others_[0].get();
  const std::string id = leaver->id();
  leaver->agent().BeginLeave();
  EXPECT_EQ(StatusIn(table_.Snapshot(), id), v1::MEMBER_SHUTTING_DOWN);
  leaver->agent().Leave();
  EXPECT_EQ(StatusIn(table_.Snapshot(), id), v1::MEMBER_DEAD);
  const v1::MembershipView snap = table_.Snapshot();
  for (const v1::Member& m : snap.members()) {
    if (storage::MemberId(m) == id) {
      EXPECT_EQ(m.suspicions_size(), 0);
    }
  }
  EXPECT_TRUE(Eventually([&] {
    return StatusIn(primary_->agent().view(), id) == v1::MEMBER_DEAD;
  }));
}

TEST(MembershipOptionsTest, OutOfRangeOptionsAreRefused) {
  EXPECT_TRUE(ValidateMembershipOptions(MembershipOptions{}).ok());
  MembershipOptions o;
  o.missed_probes = 0;
  EXPECT_THAT(ValidateMembershipOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = MembershipOptions{};
  o.probe_interval = absl::ZeroDuration();
  EXPECT_THAT(ValidateMembershipOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = MembershipOptions{};
  o.votes_to_kill = 0;
  EXPECT_THAT(ValidateMembershipOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o = MembershipOptions{};
  o.vote_expiry = absl::Seconds(1);  // shorter than 2 missed 1 s probes
  EXPECT_THAT(ValidateMembershipOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A table served on `port` (0: any), as a dev cluster's primary serves it.
struct TableServer {
  TableServer(storage::InMemoryMembershipTable* table, int want_port)
      : service(table) {
    rpc::HoldGrpcCallbackQueue();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", want_port),
                             grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~TableServer() {
    server->Shutdown(absl::ToChronoTime(absl::Now()));
    server->Wait();
  }
  MembershipService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

v1::Member Joining(int n) {
  v1::Member m;
  m.set_address(absl::StrCat("127.0.0.1:", 20000 + n));
  m.set_generation(1);
  m.set_status(v1::MEMBER_JOINING);
  return m;
}

// The versions a watch delivered, and a wait for one of them.
struct SeenVersions {
  void Add(int64_t v) {
    MutexLock lock(&mu);
    versions.push_back(v);
    cv.SignalAll();
  }
  bool WaitFor(int64_t v) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    MutexLock lock(&mu);
    while (versions.empty() || versions.back() < v) {
      if (cv.WaitWithDeadline(&mu, deadline)) return false;
    }
    return true;
  }
  Mutex mu;
  CondVar cv;
  std::vector<int64_t> versions ABSL_GUARDED_BY(mu);
};

TEST(RemoteMembershipTableTest, TheWatchReconnectsWhenThePrimaryComesBack) {
  storage::InMemoryMembershipTable first;
  ASSERT_TRUE(first.WriteNow(Joining(1), 0).ok());
  auto server = std::make_unique<TableServer>(&first, 0);
  const int port = server->port;
  ASSERT_GT(port, 0);
  TimerQueue timers(Clock::System());
  ASSERT_TRUE(timers.Start().ok());
  RemoteMembershipTable remote(absl::StrCat("127.0.0.1:", port));
  SeenVersions seen;
  remote.Watch(&timers,
               [&](const v1::MembershipView& v) { seen.Add(v.version()); });
  ASSERT_TRUE(seen.WaitFor(1));
  // The primary goes away; a table of a later version is served on the same
  // port: the watch reaches it without being restarted.
  server.reset();
  storage::InMemoryMembershipTable second;
  ASSERT_TRUE(second.WriteNow(Joining(1), 0).ok());
  ASSERT_TRUE(second.WriteNow(Joining(2), 1).ok());
  ASSERT_TRUE(second.WriteNow(Joining(3), 2).ok());
  server = std::make_unique<TableServer>(&second, port);
  ASSERT_EQ(server->port, port);
  EXPECT_TRUE(seen.WaitFor(3));
  // Versions only go forward, and a write pushes the next one.
  ASSERT_TRUE(second.WriteNow(Joining(4), 3).ok());
  EXPECT_TRUE(seen.WaitFor(4));
  remote.StopWatch();
  remote.StopWatch();  // idempotent
  MutexLock lock(&seen.mu);
  EXPECT_TRUE(std::is_sorted(seen.versions.begin(), seen.versions.end()));
  EXPECT_EQ(seen.versions.back(), 4);
}

TEST(RemoteMembershipTableTest, StopWatchReturnsWhileThePrimaryIsUnreachable) {
  TimerQueue timers(Clock::System());
  ASSERT_TRUE(timers.Start().ok());
  RemoteMembershipTable remote("127.0.0.1:1");
  std::atomic<int> views{0};
  remote.Watch(&timers, [&](const v1::MembershipView&) { views.fetch_add(1); });
  remote.StopWatch();  // the stream waits for the primary: cancelled
  EXPECT_EQ(views.load(), 0);
}

TEST(RemoteMembershipTableTest, AnUnreachablePrimaryIsUnavailable) {
  // A refused connection fails at once; the long deadline only keeps a slow
  // (sanitized, loaded) run from timing out first.
  RemoteMembershipTable remote("127.0.0.1:1", absl::Seconds(10));
  absl::StatusOr<absl::StatusOr<v1::MembershipView>> read = remote.Read().Get();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(*read, StatusIs(absl::StatusCode::kUnavailable));
  v1::Member m;
  m.set_address("127.0.0.1:2");
  m.set_generation(1);
  m.set_status(v1::MEMBER_JOINING);
  MembershipAgent agent(&remote, nullptr, m, MembershipOptions{});
  absl::Status joined = agent.Join(absl::Milliseconds(500));
  EXPECT_THAT(joined, StatusIs(absl::StatusCode::kUnavailable,
                               ::testing::HasSubstr("joining the cluster")));
}

}  // namespace
}  // namespace granary::silo
