// Silos that host different grain types (--grain_types) and carry labels
// (--labels), in one process (testing/in_process_cluster.h): a type hosted
// by one silo lives only there whichever silo its callers use; with that
// silo gone its calls fail UNIMPLEMENTED at once, naming the type, and a
// replacement brings it back; a type with a placement filter activates only
// on silos whose labels match it.
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/in_process_cluster.h"
#include "tests/cluster_grains.h"
#include "tests/in_process_calls.h"

namespace granary::testing {
namespace {

using clustertest::BilledRef;
using clustertest::LocatedRef;
using clustertest::Location;
using clustertest::WhereRequest;
using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::testing::HasSubstr;

constexpr char kLocated[] = "granary.clustertest.Located";
constexpr char kHashed[] = "granary.clustertest.Hashed";
constexpr char kPooled[] = "granary.clustertest.Pooled";

InProcessClusterOptions MixedSilos(
    std::function<void(int, silo::SiloHostOptions&)> configure) {
  InProcessClusterOptions o;
  o.silos = 3;
  o.grains = [](silo::SiloHost& host) {
    (void)host.AddGrain<LocatedGrain>();
    (void)host.AddGrain<HashedGrain>();
    (void)host.AddGrain<BilledGrain>();
    (void)host.AddGrain<PooledGrain>();
  };
  o.configure = std::move(configure);
  return o;
}

absl::StatusOr<Location> BilledWhere(silo::Runtime& via,
                                     const std::string& key) {
  return Await(Start(via.Get<BilledRef>(key).Where(WhereRequest())));
}

TEST(MixedClusterTest, ATypeHostedByOneSiloLivesOnlyThere) {
  // Silo 1 alone hosts Located; every silo hosts Hashed.
  InProcessCluster c(MixedSilos([](int i, silo::SiloHostOptions& o) {
    o.grain_types = {kHashed};
    if (i == 1) o.grain_types.push_back(kLocated);
  }));
  ASSERT_THAT(c.Start(), IsOk());
  constexpr int kGrains = 1000;
  std::vector<std::vector<absl::StatusOr<Location>>> seen(c.size());
  std::vector<std::thread> callers;
  for (int s = 0; s < c.size(); ++s) {
    callers.emplace_back([&, s] {
      for (int g = 0; g < kGrains; ++g) {
        seen[s].push_back(Where(c.silo(s), absl::StrCat("one-", g)));
      }
    });
  }
  for (std::thread& t : callers) t.join();
  int elsewhere = 0;
  for (int s = 0; s < c.size(); ++s) {
    for (int g = 0; g < kGrains; ++g) {
      ASSERT_THAT(seen[s][g], IsOk()) << "via silo " << s << ", grain " << g;
      if (seen[s][g]->silo() != c.id(1)) ++elsewhere;
    }
  }
  EXPECT_EQ(elsewhere, 0) << "answers from silos that do not host Located";
  EXPECT_EQ(c.silo(0).ActivationCount(), 0u);
  EXPECT_EQ(c.silo(2).ActivationCount(), 0u);

  // With silo 1 gone no silo hosts Located: the call fails at once (the
  // clock does not move, so no retry could run), naming the type.
  c.Kill(1);
  EXPECT_THAT(Where(c.silo(0), "one-0"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(kLocated)));
  EXPECT_THAT(Where(c.silo(2), "new-grain"),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(kLocated)));

  // A replacement hosting it brings the type back.
  ASSERT_THAT(c.Replace(1), IsOk());
  // (Its directory entry may be on the way out: the clock moves so that
  // retries run.)
  auto call = Start(c.silo(0).Get<LocatedRef>("one-0").Where(WhereRequest()));
  ASSERT_TRUE(c.AdvanceUntil([&] { return call->done(); }));
  absl::StatusOr<Location> back = Await(call);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->silo(), c.id(1));
}

TEST(MixedClusterTest, APlacementFilterKeepsATypeOnMatchingSilos) {
  // Only silo 2 carries role=billing, which Billed's filter asks for.
  InProcessCluster c(MixedSilos([](int i, silo::SiloHostOptions& o) {
    o.labels = i == 2 ? "role=billing,zone=b" : "role=web,zone=a";
  }));
  ASSERT_THAT(c.Start(), IsOk());
  constexpr int kActivations = 10000;
  int elsewhere = 0;
  for (int g = 0; g < kActivations; ++g) {
    absl::StatusOr<Location> l =
        BilledWhere(c.silo(g % c.size()), absl::StrCat("bill-", g));
    ASSERT_THAT(l, IsOk()) << "grain " << g;
    if (l->silo() != c.id(2)) ++elsewhere;
  }
  EXPECT_EQ(elsewhere, 0) << "Billed activated off the role=billing silo";
  EXPECT_EQ(c.silo(2).ActivationCount(), static_cast<size_t>(kActivations));

  // Without a matching silo, UNIMPLEMENTED names the filter.
  c.Kill(2);
  EXPECT_THAT(
      BilledWhere(c.silo(0), "bill-new"),
      StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("role=billing")));
  // Types without a filter are placed anywhere still.
  EXPECT_THAT(Where(c.silo(0), "anywhere"), IsOk());
}

// While the only silo matching a filter is shutting down (a rolling
// restart), a new activation waits for a matching silo instead of failing.
TEST(MixedClusterTest, AFilteredTypeWaitsWhileItsSiloIsReplaced) {
  InProcessCluster c(MixedSilos([](int i, silo::SiloHostOptions& o) {
    o.labels = i == 2 ? "role=billing" : "role=web";
  }));
  ASSERT_THAT(c.Start(), IsOk());
  c.BeginLeave(2);
  auto call = Start(c.silo(0).Get<BilledRef>("waits").Where(WhereRequest()));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(call->done())
      << "failed while its silo was shutting down: " << call->result.status();
  ASSERT_THAT(c.Replace(2), IsOk());
  ASSERT_TRUE(c.AdvanceUntil([&] { return call->done(); }));
  absl::StatusOr<Location> l = Await(call);
  ASSERT_THAT(l, IsOk());
  EXPECT_EQ(l->silo(), c.id(2));
}

// A stateless worker runs on the silo that receives its call, or, where its
// type is not hosted, on a silo that hosts it (no directory involved).
TEST(MixedClusterTest, AStatelessWorkerRunsOnlyWhereItIsHosted) {
  InProcessCluster c(MixedSilos([](int i, silo::SiloHostOptions& o) {
    o.grain_types = {kLocated};
    if (i == 1) o.grain_types.push_back(kPooled);
  }));
  ASSERT_THAT(c.Start(), IsOk());
  for (int n = 0; n < 300; ++n) {
    absl::StatusOr<Location> l =
        Await(Start(c.silo(n % c.size())
                        .Get<clustertest::PooledRef>(absl::StrCat("w", n % 7))
                        .Where(WhereRequest())));
    ASSERT_THAT(l, IsOk()) << n;
    EXPECT_EQ(l->silo(), c.id(1)) << n;
  }
  c.Kill(1);
  EXPECT_THAT(Await(Start(c.silo(0).Get<clustertest::PooledRef>("w0").Where(
                  WhereRequest()))),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(kPooled)));
}

// A stateless worker whose only hosting silo is being replaced waits for
// it, as a grain's first call does, rather than failing.
TEST(MixedClusterTest, AStatelessWorkerWaitsWhileItsSiloIsReplaced) {
  InProcessCluster c(MixedSilos([](int i, silo::SiloHostOptions& o) {
    o.grain_types = {kLocated};
    if (i == 1) o.grain_types.push_back(kPooled);
  }));
  ASSERT_THAT(c.Start(), IsOk());
  c.BeginLeave(1);
  auto call =
      Start(c.silo(0).Get<clustertest::PooledRef>("w0").Where(WhereRequest()));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(call->done())
      << "failed while its silo was shutting down: " << call->result.status();
  ASSERT_THAT(c.Replace(1), IsOk());
  ASSERT_TRUE(c.AdvanceUntil([&] { return call->done(); }));
  absl::StatusOr<Location> l = Await(call);
  ASSERT_THAT(l, IsOk());
  EXPECT_EQ(l->silo(), c.id(1));
}

TEST(MixedClusterTest, ASiloRefusesGrainTypesItWasNotBuiltWith) {
  InProcessCluster c(MixedSilos([](int, silo::SiloHostOptions& o) {
    o.grain_types = {"granary.clustertest.Nowhere"};
  }));
  EXPECT_THAT(c.Start(), StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("granary.clustertest.Nowhere")));
}

}  // namespace
}  // namespace granary::testing
