// Failure detection in one process: membership agents over one in-memory
// table, probing each other through a LoopbackNetwork whose links the tests
// cut, with every timer on one FakeClock, so each probe round runs exactly
// when a test moves the clock.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/member.h"
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

}  // namespace
}  // namespace granary::testing
