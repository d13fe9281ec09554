#include "core/memory_budget.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace granary {
namespace {

struct CountingWaiter final : MemoryBudget::Waiter {
  void Wake() override { woken.fetch_add(1); }
  std::atomic<int> woken{0};
};

TEST(MemoryBudgetTest, OverAtTheLimitAndUnderBelowIt) {
  MemoryBudget budget(100);
  EXPECT_FALSE(budget.Over());
  budget.Charge(99);
  EXPECT_FALSE(budget.Over());
  budget.Charge(1);
  EXPECT_TRUE(budget.Over());
  EXPECT_EQ(budget.used(), 100);
  budget.Release(1);
  EXPECT_FALSE(budget.Over());
  budget.Release(99);
  EXPECT_EQ(budget.used(), 0);
}

TEST(MemoryBudgetTest, NoLimitIsNeverOver) {
  MemoryBudget budget(0);
  budget.Charge(int64_t{1} << 40);
  EXPECT_FALSE(budget.Over());
  CountingWaiter w;
  EXPECT_FALSE(budget.WakeWhenUnder(&w));
}

TEST(MemoryBudgetTest, AWaiterIsWokenOnceWhenTheBudgetGoesUnder) {
  MemoryBudget budget(10);
  CountingWaiter w;
  EXPECT_FALSE(budget.WakeWhenUnder(&w)) << "under: not registered";
  budget.Charge(15);
  EXPECT_TRUE(budget.WakeWhenUnder(&w));
  EXPECT_TRUE(budget.WakeWhenUnder(&w)) << "twice is once";
  budget.Release(4);  // 11: still over
  EXPECT_EQ(w.woken.load(), 0);
  budget.Release(1);  // 10: at the limit is over
  EXPECT_EQ(w.woken.load(), 0);
  budget.Release(1);
  EXPECT_EQ(w.woken.load(), 1);
  budget.Release(9);
  EXPECT_EQ(w.woken.load(), 1) << "woken waiters are forgotten";
}

TEST(MemoryBudgetTest, ACancelledWaiterIsNotWoken) {
  MemoryBudget budget(10);
  CountingWaiter w;
  budget.Charge(10);
  ASSERT_TRUE(budget.WakeWhenUnder(&w));
  EXPECT_TRUE(budget.Cancel(&w));
  EXPECT_FALSE(budget.Cancel(&w));
  budget.Release(10);
  EXPECT_EQ(w.woken.load(), 0);
}

TEST(MemoryBudgetTest, WakeAllWakesEveryWaiter) {
  MemoryBudget budget(1);
  budget.Charge(1);
  CountingWaiter a, b;
  ASSERT_TRUE(budget.WakeWhenUnder(&a));
  ASSERT_TRUE(budget.WakeWhenUnder(&b));
  budget.WakeAll();
  EXPECT_EQ(a.woken.load(), 1);
  EXPECT_EQ(b.woken.load(), 1);
}

// A waiter that registers while others release is never left waiting
// with the budget under its limit (the lost-wake-up race).
TEST(MemoryBudgetTest, NoWakeUpIsLostUnderConcurrentReleases) {
  for (int round = 0; round < 200; ++round) {
    MemoryBudget budget(64);
    budget.Charge(64);
    CountingWaiter w;
    std::thread releaser([&] {
      for (int i = 0; i < 64; ++i) budget.Release(1);
    });
    const bool registered = budget.WakeWhenUnder(&w);
    releaser.join();
    // Either it was under already (not registered), or it was woken.
    if (registered) {
      EXPECT_EQ(w.woken.load(), 1) << "round " << round;
    } else {
      EXPECT_EQ(w.woken.load(), 0) << "round " << round;
    }
    EXPECT_EQ(budget.used(), 0);
  }
}

}  // namespace
}  // namespace granary
