// The in-memory membership table: every change a compare-and-swap on the
// version, the caps on rows and on the view, and the rules of votes
// (storage::CheckVotes) that every table applies.
#include "storage/membership_table.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/labels.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;

namespace granary::storage {
namespace {

using ::testing::HasSubstr;

v1::Member Silo(const std::string& address, int64_t generation,
                v1::MemberStatus status) {
  v1::Member m;
  m.set_address(address);
  m.set_generation(generation);
  m.set_status(status);
  return m;
}

absl::StatusOr<int64_t> WriteMember(MembershipTable& t, v1::Member m,
                                    int64_t expected) {
  absl::StatusOr<absl::StatusOr<int64_t>> out =
      t.Write(std::move(m), expected).Get();
  if (!out.ok()) return out.status();
  return *out;
}

TEST(MembershipTableTest, EveryChangeIsACompareAndSwapOnTheVersion) {
  InMemoryMembershipTable table;
  EXPECT_EQ(table.Snapshot().version(), 0);
  ASSERT_EQ(*WriteMember(table, Silo("127.0.0.1:1", 5, v1::MEMBER_JOINING), 0),
            1);
  ASSERT_EQ(*WriteMember(table, Silo("127.0.0.1:1", 5, v1::MEMBER_ACTIVE), 1),
            2);
  // A stale version is refused and changes nothing.
  absl::StatusOr<int64_t> stale =
      WriteMember(table, Silo("127.0.0.1:2", 6, v1::MEMBER_ACTIVE), 1);
  EXPECT_THAT(stale, StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(table.Snapshot().version(), 2);
  EXPECT_EQ(table.Snapshot().members_size(), 1);
  // A new generation on the same address is another member.
  ASSERT_TRUE(
      WriteMember(table, Silo("127.0.0.1:1", 7, v1::MEMBER_JOINING), 2).ok());
  EXPECT_EQ(table.Snapshot().members_size(), 2);
}

TEST(MembershipTableTest, MalformedRowsAndBackwardsStatusesAreRefused) {
  InMemoryMembershipTable table;
  ASSERT_TRUE(
      WriteMember(table, Silo("127.0.0.1:1", 5, v1::MEMBER_DEAD), 0).ok());
  for (const v1::Member& bad :
       {Silo("nohostport", 5, v1::MEMBER_ACTIVE),
        Silo("127.0.0.1:0", 5, v1::MEMBER_ACTIVE),
        Silo("127.0.0.1:1", 0, v1::MEMBER_ACTIVE),
        Silo("127.0.0.1:1", 9, v1::MEMBER_STATUS_UNSPECIFIED),
        Silo("127.0.0.1:1", 9, static_cast<v1::MemberStatus>(42)),
        Silo("127.0.0.1:1", 5, v1::MEMBER_ACTIVE)}) {  // Dead never revives
    absl::StatusOr<int64_t> r = WriteMember(table, bad, 1);
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument))
        << bad.ShortDebugString() << " " << r.status();
  }
  EXPECT_EQ(table.Snapshot().version(), 1);
}

// No member can push the view past the message limit that Read and Watch
// answer within (the attack: rows of one host padded with grain types).
TEST(MembershipTableTest, NoRowFloodCanGrowTheViewPastItsCap) {
  InMemoryMembershipTable table;
  auto padded = [](int port, int64_t generation) {
    v1::Member m =
        Silo(absl::StrCat("10.0.0.9:", port), generation, v1::MEMBER_JOINING);
    for (int i = 0; m.ByteSizeLong() < kMaxMemberBytes - 300; ++i) {
      m.add_grain_types(absl::StrCat("pad.", i, std::string(200, 'x')));
    }
    return m;
  };
  // A row past its own cap is malformed.
  v1::Member huge = padded(1, 1);
  for (int i = 0; i < 8; ++i) huge.add_grain_types(std::string(200, 'y'));
  EXPECT_THAT(WriteMember(table, huge, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  int64_t version = 0;
  int written = 0;
  absl::Status refused;
  for (int port = 1; port <= 100; ++port) {
    absl::StatusOr<int64_t> v = WriteMember(table, padded(port, port), version);
    if (!v.ok()) {
      refused = v.status();
      break;
    }
    version = *v;
    ++written;
  }
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(refused.message(), HasSubstr("cap"));
  EXPECT_GT(written, 20);
  EXPECT_LE(table.Snapshot().ByteSizeLong(), kMaxViewBytes);
  // A Dead row lists no grain types, and Dead rows make room for new ones.
  v1::Member dead = table.Snapshot().members(0);
  dead.set_status(v1::MEMBER_DEAD);
  ASSERT_TRUE(WriteMember(table, dead, version).ok());
  ++version;
  EXPECT_EQ(table.Snapshot().members(0).grain_types_size(), 0);
  EXPECT_TRUE(WriteMember(table, padded(500, 500), version).ok());
}

TEST(MembershipTableTest, GrainTypesAreSetWhenTheRowIsAddedOnly) {
  InMemoryMembershipTable table;
  v1::Member m = Silo("127.0.0.1:1", 5, v1::MEMBER_JOINING);
  m.add_grain_types("a.A");
  ASSERT_TRUE(WriteMember(table, m, 0).ok());
  m.set_status(v1::MEMBER_ACTIVE);
  ASSERT_TRUE(WriteMember(table, m, 1).ok());  // the same types: fine
  m.add_grain_types("b.B");
  EXPECT_THAT(WriteMember(table, m, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MembershipTableTest, OneHostHoldsABoundedNumberOfLiveRows) {
  InMemoryMembershipTable table;
  int64_t version = 0;
  for (int i = 1; i <= kMaxLiveRowsPerHost; ++i) {
    absl::StatusOr<int64_t> v = WriteMember(
        table, Silo(absl::StrCat("10.1.1.1:", i), i, v1::MEMBER_JOINING),
        version);
    ASSERT_TRUE(v.ok()) << v.status();
    version = *v;
  }
  absl::StatusOr<int64_t> past = WriteMember(
      table, Silo("10.1.1.1:9999", 9999, v1::MEMBER_JOINING), version);
  EXPECT_THAT(past, StatusIs(absl::StatusCode::kResourceExhausted));
  // Another host is not held back.
  EXPECT_TRUE(
      WriteMember(table, Silo("10.1.1.2:1", 1, v1::MEMBER_JOINING), version)
          .ok());
}

// Three Active silos with fresh heartbeats on a table judged by `clock`.
class VoteRulesTest : public ::testing::Test {
 protected:
  VoteRulesTest()
      : table_(VoteRules{2, absl::Seconds(30), absl::Seconds(15), &clock_}) {
    for (int i = 0; i < 3; ++i) {
      v1::Member m =
          Silo(absl::StrCat("10.0.0.", i + 1, ":11111"), 1, v1::MEMBER_JOINING);
      m.set_heartbeat_unix_ms(NowMs());
      version_ = *WriteMember(table_, m, version_);
      m.set_status(v1::MEMBER_ACTIVE);
      version_ = *WriteMember(table_, m, version_);
    }
  }
  int64_t NowMs() const { return absl::ToUnixMillis(clock_.Now()); }
  v1::Member Row(int i) const { return table_.Snapshot().members(i); }
  static std::string Id(int i) {
    return absl::StrCat("10.0.0.", i + 1, ":11111@1");
  }
  static void AddVote(v1::Member& m, int voter, int64_t at) {
    v1::Suspicion* v = m.add_suspicions();
    v->set_by(Id(voter));
    v->set_at_unix_ms(at);
  }
  absl::Status Write(const v1::Member& m) {
    absl::StatusOr<int64_t> v = WriteMember(table_, m, version_);
    if (v.ok()) version_ = *v;
    return v.status();
  }
  // Silo `i` writes a heartbeat now.
  void Beat(int i) {
    v1::Member m = Row(i);
    m.set_heartbeat_unix_ms(NowMs());
    ASSERT_THAT(Write(m), IsOk());
  }

  FakeClock clock_;
  InMemoryMembershipTable table_;
  int64_t version_ = 0;
};

TEST_F(VoteRulesTest, OneVoteCannotKillWhenTwoLiveMembersCouldVote) {
  v1::Member target = Row(2);
  AddVote(target, 0, NowMs());
  target.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(Write(target),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("with 2 votes from live members, not 1")));
  // Suspecting the other voter does not shrink the number needed either.
  v1::Member other = Row(1);
  AddVote(other, 0, NowMs());
  ASSERT_THAT(Write(other), IsOk());
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  // The vote alone is recorded; the second voter's then kills.
  target = Row(2);
  AddVote(target, 0, NowMs());
  ASSERT_THAT(Write(target), IsOk());
  target = Row(2);
  AddVote(target, 1, NowMs());
  target.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(Write(target), IsOk());
  EXPECT_EQ(Row(2).status(), v1::MEMBER_DEAD);
}

TEST_F(VoteRulesTest, VotesOfTheFutureOfTheDeadOrOfTheTargetAreRefused) {
  v1::Member target = Row(2);
  AddVote(target, 0, NowMs() + absl::ToInt64Milliseconds(kMaxVoteSkew) + 1);
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr("dated")));
  target = Row(2);
  AddVote(target, 0, NowMs() - 30'000);  // expired on arrival
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  target = Row(2);
  AddVote(target, 2, NowMs());  // on itself
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  target = Row(2);
  v1::Suspicion* stranger = target.add_suspicions();
  stranger->set_by("10.9.9.9:1@1");  // no such member
  stranger->set_at_unix_ms(NowMs());
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  target = Row(2);
  AddVote(target, 0, NowMs());
  AddVote(target, 0, NowMs() - 1);  // one voter, twice
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr("once")));
  // A new row carries no votes.
  v1::Member fresh = Silo("10.0.0.7:1", 1, v1::MEMBER_JOINING);
  AddVote(fresh, 0, NowMs());
  EXPECT_THAT(Write(fresh), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(table_.Snapshot().version(), version_);
}

TEST_F(VoteRulesTest, ACountedVoteStaysUntilItExpires) {
  v1::Member target = Row(2);
  AddVote(target, 0, NowMs());
  ASSERT_THAT(Write(target), IsOk());
  // The suspect (or anyone) cannot wipe it.
  target = Row(2);
  target.clear_suspicions();
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr("stays")));
  // Its voter may replace it with a newer vote.
  clock_.Advance(absl::Seconds(1));
  target.clear_suspicions();
  AddVote(target, 0, NowMs());
  EXPECT_THAT(Write(target), IsOk());
  // Once expired, it may go.
  clock_.Advance(absl::Seconds(31));
  target = Row(2);
  target.clear_suspicions();
  EXPECT_THAT(Write(target), IsOk());
}

TEST_F(VoteRulesTest, SilosThatStoppedBeatingDoNotCountAsVoters) {
  // Silos 1 and 2 went silent together: silo 0 alone declares them dead,
  // once their heartbeats are older than the rules allow.
  v1::Member target = Row(2);
  AddVote(target, 0, NowMs());
  target.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  clock_.Advance(absl::Seconds(16));
  Beat(0);
  target = Row(2);
  AddVote(target, 0, NowMs());
  target.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(Write(target), IsOk());
  EXPECT_EQ(
      VotesNeeded(table_.Snapshot(), Row(1),
                  VoteRules{2, absl::Seconds(30), absl::Seconds(15), &clock_},
                  NowMs()),
      1);
}

TEST_F(VoteRulesTest, DeadRowsArePurgedOnceTheirRetentionHasPassed) {
  InMemoryMembershipTable table(
      VoteRules{2, absl::Seconds(30), absl::Seconds(15), &clock_},
      absl::Minutes(5));
  int64_t version = 0;
  v1::Member gone = Silo("10.0.0.1:1", 1, v1::MEMBER_JOINING);
  version = *WriteMember(table, gone, version);
  gone.set_status(v1::MEMBER_DEAD);
  version = *WriteMember(table, gone, version);
  v1::Member live = Silo("10.0.0.2:1", 1, v1::MEMBER_JOINING);
  version = *WriteMember(table, live, version);
  clock_.Advance(absl::Minutes(4));
  live.set_status(v1::MEMBER_ACTIVE);
  version = *WriteMember(table, live, version);
  EXPECT_EQ(table.Snapshot().members_size(), 2);  // not yet
  clock_.Advance(absl::Minutes(2));
  live.set_heartbeat_unix_ms(NowMs());
  ASSERT_TRUE(WriteMember(table, live, version).ok());  // a heartbeat
  ASSERT_EQ(table.Snapshot().members_size(), 1);
  EXPECT_EQ(table.Snapshot().members(0).address(), "10.0.0.2:1");
}

TEST(MembershipTableTest, OfRacingWritersExactlyOneWinsEachVersion) {
  InMemoryMembershipTable table;
  std::vector<int64_t> seen;
  Mutex seen_mu;
  const int id = table.Subscribe([&](const v1::MembershipView& v) {
    MutexLock lock(&seen_mu);
    seen.push_back(v.version());
  });
  constexpr int kWriters = 8, kRounds = 50;
  std::vector<int> wins(kWriters, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int r = 0; r < kRounds; ++r) {
        // Everyone races for the version they read.
        const int64_t version = table.Snapshot().version();
        v1::Member m =
            Silo(absl::StrCat("127.0.0.1:", 1000 + w), 1, v1::MEMBER_JOINING);
        m.set_heartbeat_unix_ms(r + 1);
        absl::StatusOr<int64_t> got = WriteMember(table, m, version);
        if (got.ok()) {
          EXPECT_EQ(*got, version + 1);
          ++wins[w];
        } else {
          EXPECT_THAT(got, StatusIs(absl::StatusCode::kAborted));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  table.Unsubscribe(id);
  int total = 0;
  for (int w : wins) total += w;
  // One winner per version: the version counts the successful writes.
  EXPECT_EQ(table.Snapshot().version(), total);
  MutexLock lock(&seen_mu);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(static_cast<int>(seen.size()), total);
  for (int i = 0; i < static_cast<int>(seen.size()); ++i)
    EXPECT_EQ(seen[i], i + 1);
}

// Rolling upgrades: each hosted type with its version and fingerprint, and
// the silo's labels, checked and fixed like the types themselves.
TEST(MembershipTableTest, HostedVersionsAndLabelsAreCheckedAndFixed) {
  InMemoryMembershipTable table;
  auto row = [] {
    v1::Member m = Silo("127.0.0.1:1", 5, v1::MEMBER_JOINING);
    m.add_grain_types("a.A");
    v1::HostedType* h = m.add_hosted_types();
    h->set_type("a.A");
    h->set_version(2);
    h->set_fingerprint(0x1234);
    v1::Label* l = m.add_labels();
    l->set_key("role");
    l->set_value("billing");
    l = m.add_labels();
    l->set_key("zone");
    l->set_value("a");
    return m;
  };
  v1::Member bad = row();
  bad.mutable_hosted_types(0)->set_type("b.B");  // not its grain type
  EXPECT_THAT(WriteMember(table, bad, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = row();
  bad.mutable_hosted_types(0)->set_version(0);
  EXPECT_THAT(WriteMember(table, bad, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = row();
  bad.add_hosted_types()->set_type("a.A");  // more than its types
  EXPECT_THAT(WriteMember(table, bad, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = row();
  bad.mutable_labels(0)->set_key("Role");
  EXPECT_THAT(WriteMember(table, bad, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = row();
  bad.mutable_labels()->SwapElements(0, 1);  // not sorted
  EXPECT_THAT(WriteMember(table, bad, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = row();
  for (int i = 0; i <= kMaxLabels; ++i) {
    v1::Label* l = bad.add_labels();
    l->set_key(absl::StrCat("z", 100 + i));
  }
  EXPECT_THAT(WriteMember(table, bad, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));

  v1::Member m = row();
  ASSERT_TRUE(WriteMember(table, m, 0).ok());
  m.set_status(v1::MEMBER_ACTIVE);
  ASSERT_TRUE(WriteMember(table, m, 1).ok());
  v1::Member changed = m;
  changed.mutable_hosted_types(0)->set_version(3);
  EXPECT_THAT(WriteMember(table, changed, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  changed = m;
  changed.mutable_labels(1)->set_value("b");
  EXPECT_THAT(WriteMember(table, changed, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Dead: the hosted types go with the types.
  m.set_status(v1::MEMBER_DEAD);
  ASSERT_TRUE(WriteMember(table, m, 2).ok());
  EXPECT_EQ(table.Snapshot().members(0).hosted_types_size(), 0);
  EXPECT_EQ(table.Snapshot().members(0).labels_size(), 0);
}

// The load a row carries (RESOURCE_OPTIMIZED placement): checked on every
// write, free to change (heartbeats move it), dropped with a Dead row.
TEST(MembershipTableTest, ALoadIsCheckedAndGoesWithADeadRow) {
  InMemoryMembershipTable table;
  v1::Member m = Silo("127.0.0.1:1", 5, v1::MEMBER_JOINING);
  m.mutable_load()->set_cpu_permille(1001);
  EXPECT_THAT(WriteMember(table, m, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cpu_permille 1001")));
  m.mutable_load()->set_cpu_permille(1000);
  m.mutable_load()->set_memory_bytes(-1);
  EXPECT_THAT(WriteMember(table, m, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  m.mutable_load()->set_memory_bytes(1 << 20);
  m.mutable_load()->set_memory_limit_bytes(-5);
  EXPECT_THAT(WriteMember(table, m, 0),
              StatusIs(absl::StatusCode::kInvalidArgument));
  m.mutable_load()->set_memory_limit_bytes(int64_t{1} << 30);
  ASSERT_TRUE(WriteMember(table, m, 0).ok());
  m.set_status(v1::MEMBER_ACTIVE);
  m.mutable_load()->set_cpu_permille(250);
  ASSERT_TRUE(WriteMember(table, m, 1).ok());
  EXPECT_EQ(table.Snapshot().members(0).load().cpu_permille(), 250u);
  m.set_status(v1::MEMBER_DEAD);
  ASSERT_TRUE(WriteMember(table, m, 2).ok());
  EXPECT_FALSE(table.Snapshot().members(0).has_load());
}

}  // namespace
}  // namespace granary::storage
