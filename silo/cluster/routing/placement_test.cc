#include "silo/cluster/routing/placement.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "granary/options.pb.h"
#include "granary/v1/cluster.pb.h"
#include "gtest/gtest.h"

namespace granary::silo {
namespace {

using ::testing::AnyOf;
using ::testing::Eq;

class PlacementTest : public ::testing::Test {
 protected:
  PlacementTest() {
    for (auto [id, n] :
         {std::pair<const char*, int64_t>{"a", 5}, {"b", 0}, {"c", 9}}) {
      PlacementCandidate c;
      c.id = id;
      c.activations = n;
      silos_.push_back(std::move(c));
    }
    context_.self = "a";
    context_.self_can_host = true;
    for (const PlacementCandidate& s : silos_)
      context_.candidates.push_back(&s);
  }
  std::vector<PlacementCandidate> silos_;
  PlacementContext context_;
  const GrainId id_{"granary.testing.Thing", "k"};
};

TEST_F(PlacementTest, EachStrategyHasItsDirector) {
  EXPECT_NE(dynamic_cast<const RandomPlacement*>(&PlacementFor(RANDOM)),
            nullptr);
  EXPECT_NE(
      dynamic_cast<const PreferLocalPlacement*>(&PlacementFor(PREFER_LOCAL)),
      nullptr);
  EXPECT_NE(dynamic_cast<const HashPlacement*>(&PlacementFor(HASH)), nullptr);
  EXPECT_NE(dynamic_cast<const ActivationCountPlacement*>(
                &PlacementFor(ACTIVATION_COUNT)),
            nullptr);
  // An unknown strategy (a newer peer's) is placed at random.
  EXPECT_NE(dynamic_cast<const RandomPlacement*>(&PlacementFor(99)), nullptr);
}

TEST_F(PlacementTest, RandomReachesEveryCandidate) {
  std::map<std::string, int> seen;
  for (int i = 0; i < 1000; ++i) ++seen[RandomPlacement().Place(id_, context_)];
  EXPECT_EQ(seen.size(), 3u);
  for (const auto& [silo, n] : seen) {
    EXPECT_THAT(silo, AnyOf(Eq("a"), Eq("b"), Eq("c")));
  }
}

TEST_F(PlacementTest, PreferLocalIsThisSiloWhenItCanHost) {
  EXPECT_EQ(PreferLocalPlacement().Place(id_, context_), "a");
  // Stopping: another candidate (this silo is not among them then).
  context_.self_can_host = false;
  context_.candidates.erase(context_.candidates.begin());
  for (int i = 0; i < 100; ++i) {
    EXPECT_THAT(PreferLocalPlacement().Place(id_, context_),
                AnyOf(Eq("b"), Eq("c")));
  }
}

TEST_F(PlacementTest, HashIsTheOwnerWhenItCanHostElseTheSameForEveryCaller) {
  context_.hash_owner = std::string("c");
  EXPECT_EQ(HashPlacement().Place(id_, context_), "c");
  // The owner is not a candidate: every silo computes the same choice.
  context_.hash_owner = std::string("gone");
  const std::string first = HashPlacement().Place(id_, context_);
  PlacementContext elsewhere = context_;
  elsewhere.self = "b";
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(HashPlacement().Place(id_, context_), first);
    EXPECT_EQ(HashPlacement().Place(id_, elsewhere), first);
  }
}

TEST_F(PlacementTest, ActivationCountFavoursTheEmptierSilo) {
  // Two silos, 5 and 0 activations: of two random picks the emptier wins
  // unless both picks are the fuller one (1 in 4).
  context_.candidates.pop_back();
  int emptier = 0;
  for (int i = 0; i < 1000; ++i) {
    emptier += ActivationCountPlacement().Place(id_, context_) == "b";
  }
  EXPECT_GT(emptier, 600);
  // This silo's own count is read now, not from its heartbeat.
  context_.self_activations = [] { return int64_t{0}; };
  silos_[1].activations = 7;
  int self = 0;
  for (int i = 0; i < 1000; ++i) {
    self += ActivationCountPlacement().Place(id_, context_) == "a";
  }
  EXPECT_GT(self, 600);
}

// A membership row as a candidate: the versions of the types it hosts
// (version 1 for a row of an earlier release, without hosted_types) and its
// labels, which CanHost checks against a call's version and a type's filter.
TEST(PlacementCandidateTest, HostsATypeInItsVersionOnSilosWithItsLabels) {
  v1::Member m;
  m.add_grain_types("a.Counter");
  m.add_grain_types("a.Invoice");
  v1::HostedType* h = m.add_hosted_types();
  h->set_type("a.Counter");
  h->set_version(2);
  h = m.add_hosted_types();
  h->set_type("a.Invoice");
  h->set_version(1);
  v1::Label* l = m.add_labels();
  l->set_key("role");
  l->set_value("billing");
  const PlacementCandidate c = CandidateOf(m, "s@1");
  EXPECT_EQ(c.id, "s@1");
  EXPECT_TRUE(c.CanHost("a.Counter", 1, {}));
  EXPECT_TRUE(c.CanHost("a.Counter", 2, {}));
  EXPECT_FALSE(c.CanHost("a.Counter", 3, {}));
  EXPECT_FALSE(c.CanHost("a.Missing", 1, {}));
  EXPECT_TRUE(c.CanHost("a.Invoice", 1, *ParseLabels("role=billing")));
  EXPECT_FALSE(c.CanHost("a.Invoice", 1, *ParseLabels("role=web")));

  v1::Member old;  // an earlier release's row: types only
  old.add_grain_types("a.Counter");
  const PlacementCandidate o = CandidateOf(old, "o@1");
  EXPECT_TRUE(o.CanHost("a.Counter", 1, {}));
  EXPECT_FALSE(o.CanHost("a.Counter", 2, {}));
  EXPECT_FALSE(o.CanHost("a.Counter", 1, *ParseLabels("role=billing")));
}

}  // namespace
}  // namespace granary::silo
