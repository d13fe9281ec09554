// The cluster's routing, directory and rebuild in one process: an
// InProcessCluster (testing/in_process_cluster.h) of whole SiloHosts
// (membership agents, leases, partitions, routers and directory clients)
// over a LoopbackNetwork whose links the tests break, and one FakeClock
// that only the tests move, so retries and delays happen exactly when a
// test says.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/in_process_cluster.h"
#include "tests/cluster_grains.h"
#include "tests/in_process_calls.h"

namespace granary::testing {
namespace {

using clustertest::HashedRef;
using clustertest::LocatedRef;
using clustertest::Location;
using clustertest::WhereRequest;
using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using Fault = InProcessCluster::Fault;

// A Located grain whose directory owner is silo `owner`.
std::string KeyOwnedBy(InProcessCluster& c, int owner, const std::string& tag) {
  for (int k = 0;; ++k) {
    const std::string key = absl::StrCat(tag, k);
    const GrainId id(LocatedRef::Interface().type_name, key);
    if (c.partition(0).OwnerOf(id) == c.id(owner)) return key;
  }
}

TEST(ClusterInProcessTest,
     RandomlyPlacedGrainsHaveOneActivationWhileSilosRace) {
  InProcessCluster c(Silos(3));
  ASSERT_THAT(c.Start(), IsOk());
  constexpr int kGrains = 300;
  // Every silo makes the first call of every grain at once; each silo's
  // placement picks a silo at random, so most grains are raced for by
  // different silos.
  std::vector<std::vector<absl::StatusOr<Location>>> seen(c.size());
  std::vector<std::thread> callers;
  for (int s = 0; s < c.size(); ++s) {
    callers.emplace_back([&, s] {
      for (int g = 0; g < kGrains; ++g) {
        seen[s].push_back(Where(c.silo(s), absl::StrCat("race", g)));
      }
    });
  }
  for (std::thread& t : callers) t.join();
  std::map<std::string, int> per_silo;
  for (int g = 0; g < kGrains; ++g) {
    ASSERT_THAT(seen[0][g], IsOk());
    for (int s = 1; s < c.size(); ++s) {
      ASSERT_THAT(seen[s][g], IsOk());
      EXPECT_EQ(seen[s][g]->activation(), seen[0][g]->activation())
          << "grain race" << g << " answered from two activations";
      EXPECT_EQ(seen[s][g]->silo(), seen[0][g]->silo());
    }
    ++per_silo[seen[0][g]->silo()];
  }
  // Random placement spreads them over every silo.
  EXPECT_EQ(per_silo.size(), 3u);
}

TEST(ClusterInProcessTest, CallsFromGrainsCrossSilosToTheOneActivation) {
  InProcessCluster c(Silos(3));
  ASSERT_THAT(c.Start(), IsOk());
  const std::string far = KeyLivingOn(c, 2, "far");
  const uint64_t before = c.router(0).forwarded() + c.router(1).forwarded();
  clustertest::HopRequest hops;
  hops.add_keys(far);
  const std::string near = KeyLivingOn(c, 0, "near");
  absl::StatusOr<Location> via_chain =
      Await(Start(c.silo(1).Get<LocatedRef>(near).Chain(hops)));
  ASSERT_THAT(via_chain, IsOk());
  EXPECT_EQ(via_chain->silo(), c.id(2));
  EXPECT_EQ(via_chain->activation(), Where(c.silo(2), far)->activation());
  EXPECT_GT(c.router(0).forwarded() + c.router(1).forwarded(), before);
}

TEST(ClusterInProcessTest, DirectoryRetriesRunWhenTheClockSaysSo) {
  InProcessCluster c(Silos(3, [](silo::SiloHostOptions& o) {
    o.route_retry_delay = absl::Milliseconds(20);
  }));
  ASSERT_THAT(c.Start(), IsOk());
  // A grain whose directory owner is silo 1, called through silo 0 while
  // silo 0 cannot reach silo 1.
  const std::string key = KeyOwnedBy(c, 1, "owned");
  c.net().SetFault(c.id(0), c.id(1), Fault::kRefuse);
  std::shared_ptr<Pending> call =
      Start(c.silo(0).Get<LocatedRef>(key).Where(WhereRequest()));
  ASSERT_TRUE(WaitUntil([&] { return c.router(0).retries() >= 1; }));
  const uint64_t sent = c.net().delivered();
  c.net().HealAll();
  // Healed, but the retry is due only 20 ms later on the fake clock: no
  // request went out, and the call waits.
  EXPECT_EQ(c.net().delivered(), sent);
  EXPECT_FALSE(call->done());
  c.clock().Advance(absl::Milliseconds(20));
  ASSERT_TRUE(call->finished.WaitForNotificationWithTimeout(absl::Minutes(1)));
  ASSERT_THAT(call->result, IsOk());
  EXPECT_EQ(call->result->activation(), Where(c.silo(1), key)->activation());
}

TEST(ClusterInProcessTest, CallsGiveUpUnavailableWhenTheOwnerStaysUnreachable) {
  // The routing gives up after 2 s; failure detection, which would declare
  // the unreachable silo dead first, waits longer than the test.
  InProcessCluster c(Silos(2, [](silo::SiloHostOptions& o) {
    o.route_timeout = absl::Seconds(2);
    o.probe_interval = absl::Seconds(10);
  }));
  ASSERT_THAT(c.Start(), IsOk());
  const std::string key = KeyOwnedBy(c, 1, "lost");
  c.net().SetFault(c.id(0), c.id(1), Fault::kRefuse);
  std::shared_ptr<Pending> call =
      Start(c.silo(0).Get<LocatedRef>(key).Where(WhereRequest()));
  ASSERT_TRUE(WaitUntil([&] { return c.router(0).retries() >= 1; }));
  c.clock().Advance(absl::Seconds(3));  // past give_up_after
  ASSERT_TRUE(call->finished.WaitForNotificationWithTimeout(absl::Minutes(1)));
  EXPECT_THAT(call->result, StatusIs(absl::StatusCode::kUnavailable));
}

TEST(ClusterInProcessTest,
     RebuildKeepsEveryActivationOfTheSurvivorsWhenAnOwnerDies) {
  InProcessCluster c(Silos(3));
  ASSERT_THAT(c.Start(), IsOk());
  constexpr int kGrains = 300;
  std::vector<Location> before(kGrains);
  for (int g = 0; g < kGrains; ++g) {
    absl::StatusOr<Location> l = Where(c.silo(g % 3), absl::StrCat("keep", g));
    ASSERT_THAT(l, IsOk());
    before[g] = *l;
  }
  // Grains living on silos 0 and 1 whose directory entries silo 2 held:
  // only the survivors' rebuild reports tell the new owners about them.
  int owned_by_dead = 0;
  for (int g = 0; g < kGrains; ++g) {
    const GrainId id(LocatedRef::Interface().type_name,
                     absl::StrCat("keep", g));
    if (before[g].silo() != c.id(2) && c.partition(0).OwnerOf(id) == c.id(2)) {
      ++owned_by_dead;
    }
  }
  ASSERT_GT(owned_by_dead, 0);
  c.Kill(2);
  // The survivors learn of it one after the other: a report that reaches
  // an owner still on the old view is sent again on the clock.
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(c.AdvanceUntil([&] {
      return c.router(s).reported_ring() == c.partition(s).ring_fingerprint();
    })) << "silo "
        << s << " did not deliver its rebuild report";
  }
  // The new owners know where the survivors' grains live.
  for (int g = 0; g < kGrains; ++g) {
    if (before[g].silo() == c.id(2)) continue;
    const GrainId id(LocatedRef::Interface().type_name,
                     absl::StrCat("keep", g));
    const int owner = c.IndexOf(c.partition(0).OwnerOf(id));
    ASSERT_GE(owner, 0);
    v1::DirectoryRequest lookup;
    lookup.mutable_entry()->set_type(std::string(id.type()));
    lookup.mutable_entry()->set_key(id.key());
    lookup.set_view_version(c.partition(owner).view_version());
    absl::StatusOr<v1::DirectoryReply> entry =
        c.partition(owner).Lookup(lookup);
    ASSERT_THAT(entry, IsOk()) << "keep" << g;
    ASSERT_TRUE(entry->found())
        << "keep" << g << " is unknown to its new owner";
    EXPECT_EQ(entry->entry().silo(), before[g].silo()) << "keep" << g;
  }
  // A grain of the dead silo is activated again once that silo's lease has
  // run out on the clock (until then it might still run there).
  for (int g = 0; g < kGrains; ++g) {
    std::shared_ptr<Pending> call =
        Start(c.silo(1 - g % 2)
                  .Get<LocatedRef>(absl::StrCat("keep", g))
                  .Where(WhereRequest()));
    ASSERT_TRUE(c.AdvanceUntil([&] { return call->done(); }));
    absl::StatusOr<Location> now = call->result;
    ASSERT_THAT(now, IsOk());
    if (before[g].silo() == c.id(2)) {
      EXPECT_NE(now->silo(), c.id(2));  // a new activation on a survivor
    } else {
      EXPECT_EQ(now->activation(), before[g].activation())
          << "keep" << g << " was activated a second time";
    }
  }
}

TEST(ClusterInProcessTest,
     CallsHeldByACutLinkFailUnavailableWhenThePeerIsDeclaredDead) {
  InProcessCluster c(Silos(3));
  ASSERT_THAT(c.Start(), IsOk());
  const std::string key = KeyLivingOn(c, 1, "cut");
  ASSERT_THAT(Where(c.silo(0), key), IsOk());  // silo 0 caches where it lives
  c.net().SetFault(c.id(0), c.id(1), Fault::kBlackHole);
  std::shared_ptr<Pending> call =
      Start(c.silo(0).Get<LocatedRef>(key).Where(WhereRequest()));
  ASSERT_TRUE(WaitUntil([&] { return c.net().held() == 1; }));
  EXPECT_FALSE(call->done());
  c.Kill(1);
  ASSERT_TRUE(call->finished.WaitForNotificationWithTimeout(absl::Minutes(1)))
      << "held at the deadline, not failed at once";
  EXPECT_THAT(call->result, StatusIs(absl::StatusCode::kUnavailable));
}

TEST(ClusterInProcessTest, ADelayedLinkAnswersWhenTheDelayHasPassed) {
  InProcessCluster c(Silos(2));
  ASSERT_THAT(c.Start(), IsOk());
  const std::string key = KeyLivingOn(c, 1, "slow");
  ASSERT_THAT(Where(c.silo(0), key), IsOk());
  c.net().SetDelay(c.id(0), c.id(1), absl::Milliseconds(30));
  const uint64_t sent = c.net().delivered();
  // Sent from here (silo 0 knows where the grain lives): the call waits on
  // the link until the clock has moved 30 ms.
  std::shared_ptr<Pending> call =
      Start(c.silo(0).Get<LocatedRef>(key).Where(WhereRequest()));
  EXPECT_EQ(c.net().delivered(), sent);
  EXPECT_FALSE(call->done());
  c.clock().Advance(absl::Milliseconds(29));
  EXPECT_EQ(c.net().delivered(), sent);
  c.clock().Advance(absl::Milliseconds(1));
  ASSERT_TRUE(call->finished.WaitForNotificationWithTimeout(absl::Minutes(1)));
  EXPECT_THAT(call->result, IsOk());
}

TEST(ClusterInProcessTest, HashPlacedGrainsLiveOnTheirDirectoryOwner) {
  InProcessCluster c(Silos(3));
  ASSERT_THAT(c.Start(), IsOk());
  for (int g = 0; g < 50; ++g) {
    const std::string key = absl::StrCat("h", g);
    absl::StatusOr<Location> l =
        Await(Start(c.silo(g % 3).Get<HashedRef>(key).Where(WhereRequest())));
    ASSERT_THAT(l, IsOk());
    const GrainId id(HashedRef::Interface().type_name, key);
    EXPECT_EQ(l->silo(), c.partition(0).OwnerOf(id));
  }
}

// A silo leaving gracefully deactivates its grains while the grains' new
// directory owner is unreachable from it for a moment: the owner still
// names the gone activation. Calls for the grain must not be passed back
// and forth between the owner (which names the leaving silo) and the
// leaving silo (which sends them to the owner): both calls below are
// answered, by one new activation on the owner.
TEST(ClusterInProcessTest, ALeavingSilosGrainIsNotBouncedBetweenItAndTheOwner) {
  InProcessCluster c(Silos(3));
  ASSERT_THAT(c.Start(), IsOk());
  std::string key;
  for (int k = 0; key.empty(); ++k) {
    const std::string candidate = absl::StrCat("leaving", k);
    const GrainId id(HashedRef::Interface().type_name, candidate);
    if (c.partition(0).OwnerOf(id) == c.id(2)) key = candidate;
  }
  const GrainId id(HashedRef::Interface().type_name, key);
  absl::StatusOr<Location> first =
      Await(Start(c.silo(2).Get<HashedRef>(key).Where(WhereRequest())));
  ASSERT_THAT(first, IsOk());
  ASSERT_EQ(first->silo(), c.id(2));
  c.BeginLeave(2);
  ASSERT_TRUE(c.AdvanceUntil([&] {
    return c.router(2).reported_ring() == c.partition(2).ring_fingerprint();
  })) << "the leaving silo did not report its grains to their new owners";
  const int owner = c.IndexOf(c.partition(0).OwnerOf(id));
  ASSERT_TRUE(owner == 0 || owner == 1);
  const int other = 1 - owner;
  // The grain deactivates while the owner cannot be reached from the
  // leaving silo: its entry there outlives the activation.
  const uint64_t retries = c.router(2).retries();
  c.net().SetFault(c.id(2), c.id(owner), Fault::kRefuse);
  c.silo(2).Stop();
  // A call through the leaving silo waits until the owner can be reached
  // again (a retry on the fake clock); a call through the other silo
  // reaches the owner, which names the leaving silo.
  std::shared_ptr<Pending> via_leaving =
      Start(c.silo(2).Get<HashedRef>(key).Where(WhereRequest()));
  ASSERT_TRUE(WaitUntil([&] { return c.router(2).retries() > retries; }));
  const uint64_t sent_back = c.router(owner).forwarded();
  std::shared_ptr<Pending> via_other =
      Start(c.silo(other).Get<HashedRef>(key).Where(WhereRequest()));
  ASSERT_TRUE(
      WaitUntil([&] { return c.router(owner).forwarded() > sent_back; }));
  c.net().HealAll();
  ASSERT_TRUE(
      c.AdvanceUntil([&] { return via_leaving->done() && via_other->done(); }));
  ASSERT_THAT(via_leaving->result, IsOk());
  ASSERT_THAT(via_other->result, IsOk());
  EXPECT_EQ(via_leaving->result->silo(), c.id(owner));
  EXPECT_EQ(via_other->result->activation(), via_leaving->result->activation());
}

}  // namespace
}  // namespace granary::testing
