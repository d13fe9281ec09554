// A silo cut off from the others and from the membership table, in one
// process on one fake clock (testing/in_process_cluster.h): the others
// declare it dead and its grains come back on them, and no grain answers
// from two activations, because the isolated silo's membership lease
// lapses before the others can declare it dead, and it runs no grain code
// from then on. With the lease switched off the same case must see an old
// activation answer after the new one did, which shows that the case
// exercises the lease. And reminders: each silo schedules those of its
// range of the ring, every reminder ticks once per period wherever its
// grain lives, and keeps ticking after the silo of its grain or of its
// range crashed. tests/cluster_failure_test.cc runs the same cases over TCP
// between granary-silo processes on real time.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "examples/alarm_grain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/in_process_cluster.h"
#include "tests/cluster_grains.h"
#include "tests/in_process_calls.h"

namespace granary::testing {
namespace {

using clustertest::LocatedRef;
using clustertest::Location;
using clustertest::WhereRequest;
using examples::AlarmGrain;
using examples::AlarmRef;
using examples::AlarmState;
using ::granary::matchers::IsOk;
using Fault = InProcessCluster::Fault;

constexpr int kVictim = 2;
constexpr int kVictims = 4;

std::shared_ptr<Pending> StartWhere(silo::Runtime& via,
                                    const std::string& key) {
  return Start(via.Get<LocatedRef>(key).Where(WhereRequest()));
}

class IsolatedSiloTest : public ::testing::TestWithParam<bool> {
 protected:
  bool lease() const { return GetParam(); }
};

std::string LeaseName(const ::testing::TestParamInfo<bool>& p) {
  return p.param ? "WithLease" : "WithoutLease";
}

TEST_P(IsolatedSiloTest, ItsGrainsComeBackElsewhereAndNoneAnswersFromTwo) {
  InProcessCluster c(Silos(3, [this](silo::SiloHostOptions& o) {
    o.unsafe_disable_lease_for_testing = !lease();
  }));
  ASSERT_THAT(c.Start(), IsOk());
  // Grains whose activations live on the silo about to be cut off.
  std::vector<std::string> keys;
  std::vector<uint64_t> old_activation;
  for (int v = 0; v < kVictims; ++v) {
    keys.push_back(KeyLivingOn(c, kVictim, absl::StrCat("victim", v, "_")));
    absl::StatusOr<Location> l = Where(c.silo(kVictim), keys.back());
    ASSERT_THAT(l, IsOk());
    old_activation.push_back(l->activation());
  }

  // Nobody reaches silo 2, it reaches nobody, and it cannot read the
  // membership table (so it cannot renew its lease, nor learn that it was
  // declared dead).
  c.net().Partition({c.id(0), c.id(1)}, {c.id(kVictim)}, Fault::kRefuse);
  c.CutFromTable(kVictim);
  ASSERT_TRUE(c.AdvanceUntil([&] { return c.dead_in_table(kVictim); },
                             absl::Milliseconds(100)))
      << "the others did not declare the isolated silo dead";
  EXPECT_FALSE(c.declared_dead(kVictim)) << "it cannot have learnt it yet";

  // Its grains answer from new activations on the others, one per grain.
  std::vector<uint64_t> new_activation;
  for (const std::string& key : keys) {
    std::shared_ptr<Pending> p = StartWhere(c.silo(0), key);
    ASSERT_TRUE(
        c.AdvanceUntil([&] { return p->done(); }, absl::Milliseconds(50)))
        << key << " does not answer on the survivors";
    ASSERT_THAT(p->result, IsOk()) << key;
    EXPECT_NE(p->result->silo(), c.id(kVictim));
    new_activation.push_back(p->result->activation());
    absl::StatusOr<Location> again = Where(c.silo(1), key);
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(again->activation(), p->result->activation())
        << key << " answers from two new activations";
  }

  // Calls made on the isolated silo itself, as its own clients would:
  // the old activations are still in its catalog. With the lease, their
  // grain code no longer runs; without it, they answer.
  std::vector<std::shared_ptr<Pending>> on_isolated;
  for (const std::string& key : keys) {
    on_isolated.push_back(StartWhere(c.silo(kVictim), key));
  }
  auto all_done = [&] {
    for (const auto& p : on_isolated) {
      if (!p->done()) return false;
    }
    return true;
  };
  (void)c.AdvanceUntil(all_done, absl::Milliseconds(50), 40);

  // Its link to the table heals: it learns that it was declared dead.
  c.HealTable(kVictim);
  EXPECT_TRUE(c.AdvanceUntil([&] { return c.declared_dead(kVictim); },
                             absl::Milliseconds(100)))
      << "the isolated silo did not learn that it was declared dead";
  c.Stop();  // fails whatever still waits on the isolated silo

  int stale = 0;
  for (size_t v = 0; v < keys.size(); ++v) {
    ASSERT_TRUE(on_isolated[v]->done()) << keys[v] << ": still waiting";
    const absl::StatusOr<Location>& r = on_isolated[v]->result;
    if (!r.ok()) continue;
    EXPECT_NE(r->activation(), new_activation[v]);
    if (r->activation() == old_activation[v]) ++stale;
  }
  if (lease()) {
    EXPECT_EQ(stale, 0) << "old activations answered after the new ones had";
  } else {
    EXPECT_GT(stale, 0) << "without the lease no old activation answered: "
                           "the case does not exercise the lease";
  }
}

INSTANTIATE_TEST_SUITE_P(Leases, IsolatedSiloTest, ::testing::Bool(),
                         LeaseName);

// What alarm `key`'s grain had counted of its reminder's ticks, asked
// through silo `via` while the clock moves (the call may wait for a retry
// on it): its count was read between `sent` and `answered` on the clock.
struct Reading {
  int64_t ticks = -1;  // -1: the call failed
  std::string silo;
  absl::Time sent;
  absl::Time answered;
};

Reading Read(InProcessCluster& c, int via, const std::string& key) {
  Reading r;
  r.sent = c.clock().Now();
  auto done = std::make_shared<Notification>();
  auto result = std::make_shared<absl::StatusOr<AlarmState>>();
  Detach(c.silo(via).Get<AlarmRef>(key).Get(examples::GetAlarmRequest()),
         [done, result](absl::StatusOr<AlarmState> s) {
           *result = std::move(s);
           done->Notify();
         });
  const bool answered = c.AdvanceUntil([&] { return done->HasBeenNotified(); },
                                       absl::Milliseconds(50));
  r.answered = c.clock().Now();
  if (!answered || !result->ok() || (*result)->alarms_size() != 1) return r;
  r.ticks = (*result)->alarms(0).ticks();
  r.silo = (*result)->silo();
  return r;
}

// Between readings `from` and `to` of a reminder with period `period`, its
// grain counted at least `min_ticks` ticks, and at most one a period: no
// more than fit in the longest time the two readings can span, plus
// `handovers` (a range's new owner cannot tell whether a crashed owner
// delivered the tick due as it crashed, and delivers it: reminders are at
// least once across a crash, as Orleans' are).
void ExpectTicked(const Reading& from, const Reading& to, int64_t min_ticks,
                  absl::Duration period, const std::string& key,
                  int handovers = 0) {
  ASSERT_GE(from.ticks, 0) << key;
  ASSERT_GE(to.ticks, 0) << key;
  const int64_t most = (to.answered - from.sent) / period + 1 + handovers;
  EXPECT_GE(to.ticks - from.ticks, min_ticks) << key << " missed ticks";
  EXPECT_LE(to.ticks - from.ticks, most)
      << key << " ticked more than once a period";
}

TEST(InProcessRemindersTest,
     EachTicksOncePerPeriodAndOutlivesTheSiloItLivedOn) {
  InProcessClusterOptions options;
  options.silos = 3;
  options.grains = [](silo::SiloHost& host) {
    ASSERT_TRUE(host.AddGrain<AlarmGrain>().ok());
  };
  InProcessCluster c(options);
  ASSERT_THAT(c.Start(), IsOk());
  constexpr int kAlarms = 12;
  const absl::Duration kPeriod = absl::Seconds(1);
  auto key = [](int a) { return absl::StrCat("alarm", a); };
  for (int a = 0; a < kAlarms; ++a) {
    examples::SetAlarmRequest set;
    set.set_name("beat");
    set.set_period_ms(absl::ToInt64Milliseconds(kPeriod));
    absl::StatusOr<AlarmState> s =
        c.silo(a % c.size()).Get<AlarmRef>(key(a)).Set(set).Get();
    ASSERT_THAT(s, IsOk());
  }
  // 30 s on the clock: each reminder is scheduled by one silo (its range's
  // owner), so no alarm counts more than one tick a period. (Scheduled by
  // every silo, each would count up to three.)
  std::vector<Reading> before(kAlarms);
  for (int a = 0; a < kAlarms; ++a) before[a] = Read(c, 0, key(a));
  const absl::Time start = c.clock().Now();
  ASSERT_TRUE(c.AdvanceUntil(
      [&] { return c.clock().Now() >= start + absl::Seconds(30); },
      absl::Milliseconds(100)));
  std::vector<Reading> after(kAlarms);
  for (int a = 0; a < kAlarms; ++a) {
    after[a] = Read(c, 0, key(a));
    ExpectTicked(before[a], after[a], 25, kPeriod, key(a));
  }

  // The silo of alarm 0's grain crashes: every alarm keeps ticking, its
  // grain and those of the same silo on a survivor, and the reminders that
  // silo scheduled now scheduled by the new owners of its range.
  const std::string crashed = after[0].silo;
  const int victim = c.IndexOf(crashed);
  ASSERT_GE(victim, 0) << crashed;
  c.Kill(victim);
  const int survivor = (victim + 1) % c.size();
  for (int a = 0; a < kAlarms; ++a) {
    after[a] = Read(c, survivor, key(a));
    ASSERT_GE(after[a].ticks, 0)
        << key(a) << " does not answer after the crash";
  }
  const absl::Time killed = c.clock().Now();
  ASSERT_TRUE(c.AdvanceUntil(
      [&] { return c.clock().Now() >= killed + absl::Seconds(10); },
      absl::Milliseconds(100)));
  for (int a = 0; a < kAlarms; ++a) {
    const Reading now = Read(c, survivor, key(a));
    ExpectTicked(after[a], now, 5, kPeriod, key(a), /*handovers=*/1);
    EXPECT_NE(now.silo, crashed) << key(a) << " answers from the crashed silo";
  }
}

}  // namespace
}  // namespace granary::testing
