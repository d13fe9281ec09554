// What docs/grains.md's "Testing your grains" shows, step by step: a
// three-silo cluster in this process hosting the example BankAccount grain,
// a silo that crashes under it, and a silo cut off from the others and
// declared dead by them, all on a clock that only the test moves.
#include "testing/in_process_cluster.h"

#include "examples/bank_grain.h"
#include "gtest/gtest.h"

namespace granary::testing {
namespace {

using examples::Amount;
using examples::BankAccountGrain;
using examples::BankAccountRef;
using examples::GetBalanceRequest;

TEST(InProcessClusterTest, AnAccountOutlivesTheSiloItLivedOn) {
  InProcessClusterOptions options;
  options.silos = 3;
  options.grains = [](silo::SiloHost& host) {
    ASSERT_TRUE(host.AddGrain<BankAccountGrain>().ok());
  };
  InProcessCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());

  Amount ten;
  ten.set_amount(10);
  ASSERT_TRUE(
      cluster.silo(0).Get<BankAccountRef>("alice").Deposit(ten).Get().ok());
  // The silo the account lives on crashes.
  int home = -1;
  for (int i = 0; i < cluster.size(); ++i) {
    if (cluster.silo(i).ActivationCount() == 1) home = i;
  }
  ASSERT_GE(home, 0);
  cluster.Kill(home);

  // The next call activates it on a survivor, with its stored balance (the
  // cluster's silos share one store, as they would a database).
  const int survivor = (home + 1) % cluster.size();
  absl::StatusOr<examples::Balance> balance =
      cluster.silo(survivor)
          .Get<BankAccountRef>("alice")
          .GetBalance(GetBalanceRequest())
          .Get();
  ASSERT_TRUE(balance.ok()) << balance.status();
  EXPECT_EQ(balance->balance(), 10);
}

TEST(InProcessClusterTest, ASiloCutOffIsDeclaredDeadAsTheClockMoves) {
  InProcessCluster cluster;  // three silos, no grains
  ASSERT_TRUE(cluster.Start().ok());
  // Nobody reaches silo 2 any more, and it reaches nobody.
  cluster.net().Partition({cluster.id(0), cluster.id(1)}, {cluster.id(2)},
                          InProcessCluster::Fault::kRefuse);
  EXPECT_FALSE(cluster.declared_dead(2));  // the clock has not moved
  // Probes fail once a second on the fake clock: in a few rounds the others
  // vote it dead, and it learns so from the table.
  ASSERT_TRUE(cluster.AdvanceUntil([&] { return cluster.declared_dead(2); },
                                   absl::Milliseconds(100)));
  EXPECT_FALSE(cluster.declared_dead(0));
  EXPECT_FALSE(cluster.declared_dead(1));
}

}  // namespace
}  // namespace granary::testing
