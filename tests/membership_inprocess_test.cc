// Failure detection in one process: membership agents over one in-memory
// table, probing each other through a LoopbackNetwork whose links the tests
// cut, with every timer on one FakeClock, so each probe round runs exactly
// when a test moves the clock.
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/member.h"
#include "core/status.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/cluster/membership_agent.h"
#include "storage/membership_table.h"
#include "testing/loopback_transport.h"
#include "testing/wait.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using silo::MembershipAgent;
using silo::MembershipOptions;
using Fault = LoopbackNetwork::Fault;

class MembershipInProcessTest : public ::testing::Test {
 protected:
  struct Node {
    v1::Member self;
    std::string id;
    std::unique_ptr<LoopbackTransport> transport;
    std::unique_ptr<MembershipAgent> agent;
    Notification declared_dead;
    int subscription = 0;
    bool left = false;  // its rounds ended with Leave()
  };

  void TearDown() override {
    for (auto& n : nodes_) {
      table_.Unsubscribe(n->subscription);
      n->agent.reset();
    }
    net_.Stop();
  }

  void StartSilos(int count, MembershipOptions options = Fast()) {
    options.clock = &clock_;
    options_ = options;
    ASSERT_THAT(net_.Start(), IsOk());
    for (int i = 0; i < count; ++i) {
      auto n = std::make_unique<Node>();
      n->self.set_address(absl::StrCat("10.0.1.", i + 1, ":11111"));
      n->self.set_generation(1);
      n->id = MemberId(n->self);
      net_.Attach(n->id, n->self.address(), nullptr, nullptr);
      n->transport = std::make_unique<LoopbackTransport>(&net_, n->id);
      n->agent = std::make_unique<MembershipAgent>(&table_, n->transport.get(),
                                                   n->self, options);
      Node* raw = n.get();
      n->agent->SetDeclaredDeadHandler([raw] { raw->declared_dead.Notify(); });
      n->subscription = table_.Subscribe(
          [raw](const v1::MembershipView& v) { raw->agent->OnView(v); });
      ASSERT_THAT(n->agent->Join(absl::Seconds(1)), IsOk());
      ASSERT_THAT(n->agent->Start(), IsOk());
      nodes_.push_back(std::move(n));
    }
  }

  static MembershipOptions Fast() {
    MembershipOptions o;
    o.probe_interval = absl::Seconds(1);
    o.probe_timeout = absl::Milliseconds(500);
    o.missed_probes = 2;
    o.votes_to_kill = 2;
    o.probe_fanout = 2;
    return o;
  }

  // Moves the clock one probe interval; returns once every agent that is
  // not declared dead has run that round.
  void Round() {
    std::vector<uint64_t> before;
    for (auto& n : nodes_) before.push_back(n->agent->rounds());
    clock_.Advance(options_.probe_interval);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      Node& n = *nodes_[i];
      if (n.left) continue;
      ASSERT_TRUE(WaitUntil([&] {
        return n.agent->rounds() > before[i] ||
               n.declared_dead.HasBeenNotified();
      })) << "silo "
          << i << " ran no round";
    }
  }

  std::vector<uint64_t> RoundCounts() {
    std::vector<uint64_t> out;
    for (auto& n : nodes_) out.push_back(n->agent->rounds());
    return out;
  }
  bool Finished(const std::vector<uint64_t>& before, std::vector<int> which,
                absl::Duration limit = absl::Seconds(30)) {
    return WaitUntil(
        [&] {
          for (int i : which) {
            if (nodes_[i]->agent->rounds() <= before[i]) return false;
          }
          return true;
        },
        limit);
  }
  // Moves the clock by `jump` (to the next round's due time), then in
  // steps until silos `which` each finished a round.
  void StepUntilRound(std::vector<int> which,
                      absl::Duration step_by = absl::Milliseconds(100),
                      absl::Duration jump = absl::ZeroDuration()) {
    const std::vector<uint64_t> before = RoundCounts();
    if (jump > absl::ZeroDuration()) clock_.Advance(jump);
    for (int step = 0; step < 100; ++step) {
      if (Finished(before, which, absl::Milliseconds(50))) return;
      clock_.Advance(step_by);
    }
    ADD_FAILURE() << "no round ended within 100 steps of the clock";
  }
  // Waits until `n` more requests are held by black holes than `before`.
  void AwaitHeld(size_t before, size_t n) {
    ASSERT_TRUE(WaitUntil([&] { return net_.held() >= before + n; }));
  }

  v1::Member Row(int i) {
    const v1::MembershipView view = table_.Snapshot();
    for (const v1::Member& m : view.members()) {
      if (MemberId(m) == nodes_[i]->id) return m;
    }
    ADD_FAILURE() << "no row for silo " << i;
    return v1::Member();
  }

  FakeClock clock_;
  LoopbackNetwork net_{&clock_};
  // The table judges votes by the agents' clock and rules.
  storage::InMemoryMembershipTable table_{[this] {
    MembershipOptions o = Fast();
    o.clock = &clock_;
    return o.vote_rules();
  }()};
  MembershipOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(MembershipInProcessTest, AHealthyClusterSuspectsNobody) {
  StartSilos(3);
  for (int r = 0; r < 5; ++r) Round();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Row(i).status(), v1::MEMBER_ACTIVE);
    EXPECT_EQ(Row(i).suspicions_size(), 0);
    EXPECT_EQ(nodes_[i]->agent->probes_missed(), 0u);
    EXPECT_EQ(nodes_[i]->agent->votes_cast(), 0u);
  }
}

TEST_F(MembershipInProcessTest, ASiloNobodyReachesIsVotedDeadAndLearnsIt) {
  StartSilos(3);
  // Silos 0 and 1 cannot reach silo 2 (it still reaches them).
  net_.SetFault(nodes_[0]->id, nodes_[2]->id, Fault::kRefuse);
  net_.SetFault(nodes_[1]->id, nodes_[2]->id, Fault::kRefuse);
  Round();  // one miss each: no vote yet
  EXPECT_EQ(Row(2).status(), v1::MEMBER_ACTIVE);
  EXPECT_EQ(Row(2).suspicions_size(), 0);
  Round();  // the second miss: both vote, two votes kill
  EXPECT_EQ(Row(2).status(), v1::MEMBER_DEAD);
  EXPECT_EQ(nodes_[0]->agent->votes_cast() + nodes_[1]->agent->votes_cast(),
            2u);
  // Silo 2 reads its death from the table and stops at once.
  ASSERT_TRUE(nodes_[2]->declared_dead.WaitForNotificationWithTimeout(
      absl::Seconds(30)));
  EXPECT_EQ(Row(0).status(), v1::MEMBER_ACTIVE);
  EXPECT_EQ(Row(1).status(), v1::MEMBER_ACTIVE);
}

TEST_F(MembershipInProcessTest, MissesMustBeConsecutiveToVote) {
  StartSilos(3);
  net_.SetFault(nodes_[0]->id, nodes_[2]->id, Fault::kRefuse);
  net_.SetFault(nodes_[1]->id, nodes_[2]->id, Fault::kRefuse);
  Round();  // one miss each
  net_.HealAll();
  for (int r = 0; r < 4; ++r) Round();
  EXPECT_GT(nodes_[0]->agent->probes_missed(), 0u);
  EXPECT_EQ(nodes_[0]->agent->votes_cast() + nodes_[1]->agent->votes_cast(),
            0u);
  EXPECT_EQ(Row(2).status(), v1::MEMBER_ACTIVE);
}

TEST_F(MembershipInProcessTest, ASingleVoterCannotKillWhenTwoAreNeeded) {
  StartSilos(3);
  // Only silo 0 loses silo 2: it keeps voting, but one vote is not enough
  // while silo 1, which still reaches silo 2, could vote too.
  net_.SetFault(nodes_[0]->id, nodes_[2]->id, Fault::kRefuse);
  for (int r = 0; r < 4; ++r) Round();
  EXPECT_GT(nodes_[0]->agent->votes_cast(), 0u);
  EXPECT_EQ(Row(2).status(), v1::MEMBER_ACTIVE);
  EXPECT_EQ(Row(2).suspicions_size(), 1);
}

TEST_F(MembershipInProcessTest, TheTableHostIsNeverVotedDead) {
  MembershipOptions o = Fast();
  o.table_host = "10.0.1.3:11111";  // silo 2 hosts the table
  StartSilos(3, o);
  net_.SetFault(nodes_[0]->id, nodes_[2]->id, Fault::kRefuse);
  net_.SetFault(nodes_[1]->id, nodes_[2]->id, Fault::kRefuse);
  for (int r = 0; r < 4; ++r) Round();
  EXPECT_GT(nodes_[0]->agent->probes_missed(), 0u);
  EXPECT_EQ(nodes_[0]->agent->votes_cast() + nodes_[1]->agent->votes_cast(),
            0u);
  EXPECT_EQ(Row(2).status(), v1::MEMBER_ACTIVE);
}

TEST_F(MembershipInProcessTest, HeartbeatsCarryTheClocksTime) {
  MembershipOptions o = Fast();
  o.heartbeat_period = absl::Seconds(3);
  StartSilos(2, o);
  const int64_t joined = Row(0).heartbeat_unix_ms();
  Round();
  Round();
  EXPECT_EQ(Row(0).heartbeat_unix_ms(), joined);  // not due yet
  Round();
  EXPECT_EQ(Row(0).heartbeat_unix_ms(), absl::ToUnixMillis(clock_.Now()));
}

TEST_F(MembershipInProcessTest, AGracefulLeaveIsDeadWithoutVotes) {
  StartSilos(3);
  nodes_[2]->agent->BeginLeave();
  EXPECT_EQ(Row(2).status(), v1::MEMBER_SHUTTING_DOWN);
  nodes_[2]->agent->Leave();
  nodes_[2]->left = true;
  EXPECT_EQ(Row(2).status(), v1::MEMBER_DEAD);
  for (int r = 0; r < 3; ++r) Round();
  EXPECT_EQ(Row(2).suspicions_size(), 0);
  EXPECT_FALSE(nodes_[2]->declared_dead.HasBeenNotified());
}

// Silo 1 crashes and comes back at the same endpoint, a new generation.
// No vote from its own address counts against the old row, so the new
// generation writes it Dead itself when it joins.
TEST_F(MembershipInProcessTest, ARestartedSiloRetiresItsOlderGeneration) {
  StartSilos(2);
  const v1::Member old_row = Row(1);
  table_.Unsubscribe(nodes_[1]->subscription);
  nodes_[1]->subscription = 0;
  nodes_[1]->agent.reset();  // a crash: no leave
  nodes_[1]->left = true;
  v1::Member again = old_row;
  again.set_generation(old_row.generation() + 1);
  again.clear_suspicions();
  LoopbackTransport transport(&net_, MemberId(again));
  MembershipAgent agent(&table_, &transport, again, options_);
  ASSERT_THAT(agent.Join(absl::Seconds(1)), IsOk());
  bool old_dead = false, new_live = false;
  const v1::MembershipView after = table_.Snapshot();
  for (const v1::Member& m : after.members()) {
    if (MemberId(m) == MemberId(old_row))
      old_dead = m.status() == v1::MEMBER_DEAD;
    if (MemberId(m) == MemberId(again))
      new_live = m.status() == v1::MEMBER_ACTIVE;
  }
  EXPECT_TRUE(old_dead);
  EXPECT_TRUE(new_live);
  agent.Leave();
}

// Local health: rounds that start 2 s late (a starved host) excuse the
// probes that time out, and lengthen the next ones; once on time again the
// prober counts them, and a silo that really stopped answering is voted out.
TEST_F(MembershipInProcessTest, ALateProberExcusesTimeoutsUntilItCatchesUp) {
  StartSilos(3);
  net_.SetFault(nodes_[0]->id, nodes_[2]->id, Fault::kBlackHole);
  net_.SetFault(nodes_[1]->id, nodes_[2]->id, Fault::kBlackHole);
  std::vector<uint64_t> before = RoundCounts();
  size_t held = net_.held();
  clock_.Advance(absl::Seconds(3));  // the round due in 1 s, 2 s late
  AwaitHeld(held, 2);
  clock_.Advance(absl::Milliseconds(500));  // the probes time out
  ASSERT_TRUE(Finished(before, {0, 1}));
  for (int i : {0, 1}) {
    EXPECT_EQ(nodes_[i]->agent->probes_excused(), 1u);
    EXPECT_EQ(nodes_[i]->agent->probes_missed(), 0u);
    EXPECT_EQ(nodes_[i]->agent->health_score(), 1);
  }
  // On time, but still recovering: a 1 s timeout, excused once more.
  before = RoundCounts();
  held = net_.held();
  clock_.Advance(absl::Seconds(1));
  AwaitHeld(held, 2);
  clock_.Advance(absl::Milliseconds(500));
  EXPECT_FALSE(Finished(before, {0}, absl::Milliseconds(100)));  // 1 s
  clock_.Advance(absl::Milliseconds(500));
  ASSERT_TRUE(Finished(before, {0, 1}));
  for (int i : {0, 1}) {
    EXPECT_EQ(nodes_[i]->agent->probes_excused(), 2u);
    EXPECT_EQ(nodes_[i]->agent->health_score(), 0);
  }
  EXPECT_EQ(Row(2).status(), v1::MEMBER_ACTIVE);
  // Healthy: two timeouts in a row are two misses, and silo 2 is voted out.
  for (int r = 0; r < 2; ++r) {
    before = RoundCounts();
    held = net_.held();
    clock_.Advance(absl::Seconds(1));
    AwaitHeld(held, 2);
    clock_.Advance(absl::Milliseconds(500));
    ASSERT_TRUE(Finished(before, {0, 1}));
  }
  EXPECT_EQ(Row(2).status(), v1::MEMBER_DEAD);
  EXPECT_EQ(nodes_[0]->agent->probes_missed(), 2u);
  EXPECT_EQ(nodes_[0]->agent->probes_excused(), 2u);
}

// A refused probe (nothing listens) is a miss however late the prober is:
// a crashed silo is found as fast on a starved host.
TEST_F(MembershipInProcessTest, ARefusedProbeIsAMissEvenWhenTheProberIsLate) {
  StartSilos(3);
  net_.SetFault(nodes_[0]->id, nodes_[2]->id, Fault::kRefuse);
  net_.SetFault(nodes_[1]->id, nodes_[2]->id, Fault::kRefuse);
  for (int r = 0; r < 2; ++r) {
    const std::vector<uint64_t> before = RoundCounts();
    clock_.Advance(absl::Seconds(3));
    ASSERT_TRUE(Finished(before, {0, 1}));
  }
  EXPECT_EQ(Row(2).status(), v1::MEMBER_DEAD);
  EXPECT_GT(nodes_[0]->agent->health_score(), 0);
  EXPECT_EQ(nodes_[0]->agent->probes_excused(), 0u);
}

// Answers that take more than half the timeout raise the score, and the
// timeout grows with it: an 800 ms answer is then an answer, not a miss.
TEST_F(MembershipInProcessTest, SlowAnswersLengthenTheProbeTimeout) {
  StartSilos(3);
  // Each round ends with the delayed answer, the next is due a second
  // later: the clock jumps there, then moves in 100 ms steps.
  const absl::Duration second = absl::Seconds(1);
  net_.SetDelay(nodes_[0]->id, nodes_[2]->id, absl::Milliseconds(400));
  StepUntilRound({0}, absl::Milliseconds(100), second);
  EXPECT_EQ(nodes_[0]->agent->health_score(), 1);
  net_.SetDelay(nodes_[0]->id, nodes_[2]->id, absl::Milliseconds(800));
  StepUntilRound({0}, absl::Milliseconds(100), second);
  EXPECT_EQ(nodes_[0]->agent->health_score(), 2);
  EXPECT_EQ(nodes_[0]->agent->probes_missed(), 0u);
  EXPECT_EQ(nodes_[0]->agent->probes_excused(), 0u);
  net_.HealAll();
  for (int r = 0; r < 2; ++r) {
    StepUntilRound({0}, absl::Milliseconds(100), second);
  }
  EXPECT_EQ(nodes_[0]->agent->health_score(), 0);
  EXPECT_EQ(Row(2).suspicions_size(), 0);
}

// A host starved of CPU (pressure over kStarvedCpuPressure) excuses
// timeouts, but only kMaxExcusedTimeouts in a row per silo: a silo that
// stays silent is voted out all the same, a few rounds later.
TEST_F(MembershipInProcessTest, AStarvedHostExcusesTimeoutsOnlyForAWhile) {
  MembershipOptions o = Fast();
  o.cpu_pressure = []() -> std::optional<double> { return 90.0; };
  StartSilos(3, o);
  net_.SetFault(nodes_[0]->id, nodes_[2]->id, Fault::kBlackHole);
  net_.SetFault(nodes_[1]->id, nodes_[2]->id, Fault::kBlackHole);
  // (Steps of half a second: the pressure alone makes each round slow.)
  const absl::Duration step = absl::Milliseconds(250);
  for (int r = 0; r < silo::kMaxExcusedTimeouts; ++r) {
    StepUntilRound({0, 1}, step);
  }
  EXPECT_EQ(Row(2).status(), v1::MEMBER_ACTIVE);
  EXPECT_EQ(nodes_[0]->agent->probes_excused(),
            static_cast<uint64_t>(silo::kMaxExcusedTimeouts));
  EXPECT_EQ(nodes_[0]->agent->probes_missed(), 0u);
  EXPECT_GT(nodes_[0]->agent->health_score(), 0);
  for (int r = 0; r < 2; ++r) StepUntilRound({0, 1}, step);
  EXPECT_EQ(Row(2).status(), v1::MEMBER_DEAD);
  EXPECT_EQ(nodes_[0]->agent->probes_missed(), 2u);
}

// A table that records heartbeats in place, without a new version, as
// PostgreSQL's does (storage/postgres/postgres_membership_table.h): a fake
// around the in-memory table, for the agent's side of that contract.
class InPlaceHeartbeats final : public storage::MembershipTable {
 public:
  explicit InPlaceHeartbeats(storage::InMemoryMembershipTable* table)
      : table_(table) {}
  Task<absl::StatusOr<v1::MembershipView>> Read() override {
    absl::StatusOr<v1::MembershipView> view = co_await table_->Read();
    if (view.ok()) {
      MutexLock lock(&mu_);
      for (v1::Member& m : *view->mutable_members()) {
        auto it = beats_.find(MemberId(m));
        if (it == beats_.end()) continue;
        m.set_heartbeat_unix_ms(it->second.heartbeat_unix_ms());
        m.set_activations(it->second.activations());
        *m.mutable_load() = it->second.load();
      }
    }
    co_return view;
  }
  Task<absl::StatusOr<int64_t>> Write(v1::Member member,
                                      int64_t expected_version) override {
    co_return co_await table_->Write(std::move(member), expected_version);
  }
  Task<absl::Status> Heartbeat(v1::Member member) override {
    MutexLock lock(&mu_);
    beats_[MemberId(member)] = member;
    ++heartbeats_;
    co_return absl::OkStatus();
  }
  std::vector<v1::Member> beats() {
    MutexLock lock(&mu_);
    std::vector<v1::Member> out;
    for (const auto& [id, m] : beats_) out.push_back(m);
    return out;
  }
  int heartbeats() {
    MutexLock lock(&mu_);
    return heartbeats_;
  }

 private:
  storage::InMemoryMembershipTable* const table_;
  Mutex mu_;
  std::map<std::string, v1::Member> beats_ ABSL_GUARDED_BY(mu_);
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
};

// With a table that records heartbeats without a new version, the agent
// writes one every load_period (shorter than heartbeat_period), each with
// the load of its time; views read again at the version it has adopted
// reach the load listener, and not the view listener.
TEST_F(MembershipInProcessTest, LoadsGoInHeartbeatsEveryLoadPeriod) {
  MembershipOptions o = Fast();
  o.clock = &clock_;
  o.heartbeat_period = absl::Seconds(5);
  o.load_period = absl::Seconds(1);
  ASSERT_THAT(net_.Start(), IsOk());
  InPlaceHeartbeats table(&table_);
  v1::Member self;
  self.set_address("10.0.2.1:11111");
  self.set_generation(1);
  LoopbackTransport transport(&net_, MemberId(self));
  MembershipAgent agent(&table, &transport, self, o);
  std::atomic<uint32_t> cpu{100};
  agent.SetLoadSource([&] {
    v1::SiloLoad load;
    load.set_cpu_permille(cpu.fetch_add(1));
    load.set_memory_bytes(1 << 20);
    return load;
  });
  std::atomic<int> views{0}, loads{0};
  Mutex mu;
  v1::MembershipView last_load;
  agent.SetViewListener([&](const v1::MembershipView&) { views.fetch_add(1); });
  agent.SetLoadListener([&](const v1::MembershipView& v) {
    MutexLock lock(&mu);
    last_load = v;
    loads.fetch_add(1);
  });
  ASSERT_THAT(agent.Join(absl::Seconds(1)), IsOk());
  // Joining and Active were written with a load.
  const v1::MembershipView joined = table_.Snapshot();
  ASSERT_EQ(joined.members_size(), 1);
  EXPECT_GE(joined.members(0).load().cpu_permille(), 100u);
  ASSERT_THAT(agent.Start(), IsOk());
  for (int round = 1; round <= 3; ++round) {
    const uint64_t before = agent.rounds();
    clock_.Advance(o.probe_interval);
    ASSERT_TRUE(WaitUntil([&] { return agent.rounds() > before; }));
    EXPECT_EQ(table.heartbeats(), round) << "one heartbeat per load period";
  }
  const std::vector<v1::Member> beats = table.beats();
  ASSERT_EQ(beats.size(), 1u);
  EXPECT_EQ(beats[0].heartbeat_unix_ms(), absl::ToUnixMillis(clock_.Now()));
  EXPECT_GT(beats[0].load().cpu_permille(), 100u);
  // The table's version never moved for them.
  EXPECT_EQ(table_.Snapshot().version(), joined.version());

  // A read at the adopted version: to the load listener only.
  const int views_before = views.load();
  absl::StatusOr<v1::MembershipView> again = Flatten(table.Read().Get());
  ASSERT_THAT(again.status(), IsOk());
  agent.OnView(*again);
  EXPECT_EQ(views.load(), views_before);
  ASSERT_GE(loads.load(), 1);
  {
    MutexLock lock(&mu);
    ASSERT_EQ(last_load.members_size(), 1);
    EXPECT_EQ(last_load.members(0).load().cpu_permille(),
              beats[0].load().cpu_permille());
  }
  agent.Leave();
}

}  // namespace
}  // namespace granary::testing
