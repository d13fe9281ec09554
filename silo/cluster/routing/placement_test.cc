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
  EXPECT_NE(dynamic_cast<const ResourceOptimizedPlacement*>(
                &PlacementFor(RESOURCE_OPTIMIZED)),
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

// RESOURCE_OPTIMIZED ------------------------------------------------------

PlacementCandidate Loaded(std::string id, uint32_t cpu, int64_t activations,
                          int64_t memory = 0, int64_t limit = 1000) {
  PlacementCandidate c;
  c.id = std::move(id);
  c.cpu_permille = cpu;
  c.activations = activations;
  c.memory_bytes = memory;
  c.memory_limit_bytes = limit;
  return c;
}

// Where `n` placements among `silos` go, this silo ("self") not among them.
std::map<std::string, int> PlaceMany(
    const std::vector<PlacementCandidate>& silos, int n) {
  PlacementContext context;
  context.self = "self";
  for (const PlacementCandidate& s : silos) context.candidates.push_back(&s);
  std::map<std::string, int> seen;
  const GrainId id{"granary.testing.Thing", "k"};
  for (int i = 0; i < n; ++i) {
    ++seen[ResourceOptimizedPlacement().Place(id, context)];
  }
  return seen;
}

TEST(ResourcePlacementTest, SampleSizeIsTwoOrTheSquareRoot) {
  EXPECT_EQ(ResourceSampleSize(1), 1u);
  EXPECT_EQ(ResourceSampleSize(2), 2u);
  EXPECT_EQ(ResourceSampleSize(3), 2u);
  EXPECT_EQ(ResourceSampleSize(4), 2u);
  EXPECT_EQ(ResourceSampleSize(5), 3u);
  EXPECT_EQ(ResourceSampleSize(100), 10u);
  EXPECT_EQ(ResourceSampleSize(101), 11u);
}

TEST(ResourcePlacementTest, TheLessBusyCpuWins) {
  // Two candidates: both are always compared.
  std::map<std::string, int> seen =
      PlaceMany({Loaded("busy", 600, 10), Loaded("idle", 100, 500)}, 200);
  EXPECT_EQ(seen["idle"], 200);
}

TEST(ResourcePlacementTest, TheBusiestOfThreeIsNeverChosen) {
  // Two of three are sampled: the busiest loses to either other.
  std::map<std::string, int> seen = PlaceMany(
      {Loaded("a", 300, 10), Loaded("b", 100, 10), Loaded("c", 200, 10)}, 600);
  EXPECT_EQ(seen["a"], 0);
  EXPECT_GT(seen["b"], seen["c"]);
  EXPECT_GT(seen["c"], 0);  // when b is not sampled
}

TEST(ResourcePlacementTest, FullMemoryCountsLikeBusyCpu) {
  // 900 permille of its memory in use outweighs the other's busier CPU.
  std::map<std::string, int> seen = PlaceMany(
      {Loaded("full", 50, 10, 900, 1000), Loaded("cpu", 400, 10, 10, 1000)},
      100);
  EXPECT_EQ(seen["cpu"], 100);
}

TEST(ResourcePlacementTest, WithinTheBandFewerActivationsWin) {
  // 200 and 205 permille differ by less than 5 %: the count decides.
  std::map<std::string, int> seen =
      PlaceMany({Loaded("many", 200, 900), Loaded("few", 205, 100)}, 100);
  EXPECT_EQ(seen["few"], 100);
  // Idle silos (under the 10 permille floor) too.
  seen = PlaceMany({Loaded("many", 0, 50), Loaded("few", 9, 3)}, 100);
  EXPECT_EQ(seen["few"], 100);
}

TEST(ResourcePlacementTest, PlacementsSinceTheReportCount) {
  PlacementCandidate a = Loaded("a", 100, 100);
  PlacementCandidate b = Loaded("b", 150, 100);
  // 60 activations placed on a since its report, at 1 permille each: 160.
  a.placed = 60;
  ResourceFigures fa = FiguresOf(a, -1, 0);
  EXPECT_DOUBLE_EQ(fa.fuller_permille, 160);
  EXPECT_EQ(fa.activations, 160);
  // Before them a was the less loaded; now b is (160 and 150 are within
  // the band, and b has fewer activations).
  EXPECT_TRUE(
      LessLoaded(FiguresOf(Loaded("a", 100, 100), -1, 0), FiguresOf(b, -1, 0)));
  EXPECT_TRUE(LessLoaded(FiguresOf(b, -1, 0), fa));
  EXPECT_FALSE(LessLoaded(fa, FiguresOf(b, -1, 0)));
  // A silo that reported no activations takes the fallback per activation.
  PlacementCandidate fresh = Loaded("fresh", 0, 0);
  fresh.placed = 100;
  EXPECT_DOUBLE_EQ(FiguresOf(fresh, -1, 2.0).fuller_permille, 200);
  // Never past 1000.
  fresh.placed = 100000;
  EXPECT_DOUBLE_EQ(FiguresOf(fresh, -1, 2.0).fuller_permille, 1000);
  // This silo's own count is its current one.
  EXPECT_EQ(FiguresOf(a, 7, 0).activations, 7);
}

TEST(ResourcePlacementTest, ANewSiloDoesNotTakeEveryPlacement) {
  // A silo that just joined (idle, nothing hosted) beside two busy ones:
  // the placements counted on it since its report raise its estimate at the
  // others' CPU per activation, so once it is as busy the others get some.
  std::vector<PlacementCandidate> silos = {
      Loaded("a", 300, 300), Loaded("b", 300, 300), Loaded("new", 0, 0)};
  PlacementContext context;
  context.self = "a";
  context.self_activations = [] { return int64_t{300}; };
  for (const PlacementCandidate& s : silos) context.candidates.push_back(&s);
  std::map<std::string, int> seen;
  const GrainId id{"granary.testing.Thing", "k"};
  for (int i = 0; i < 900; ++i) {
    const std::string to = ResourceOptimizedPlacement().Place(id, context);
    ++seen[to];
    for (PlacementCandidate& s : silos) s.placed += s.id == to ? 1 : 0;
  }
  EXPECT_GT(seen["new"], 250);
  EXPECT_GT(seen["a"] + seen["b"], 0);
}

}  // namespace
}  // namespace granary::silo
