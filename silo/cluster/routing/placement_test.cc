#include "silo/cluster/routing/placement.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "granary/options.pb.h"
#include "gtest/gtest.h"

namespace granary::silo {
namespace {

using ::testing::AnyOf;
using ::testing::Eq;

class PlacementTest : public ::testing::Test {
 protected:
  PlacementTest() {
    silos_ = {{"a", 5}, {"b", 0}, {"c", 9}};
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

}  // namespace
}  // namespace granary::silo
