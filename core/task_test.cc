#include "core/task.h"

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/completion.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

using ::granary::matchers::StatusIs;

namespace granary {
namespace {

using ::testing::HasSubstr;

Task<int> Value(int v) { co_return v; }

Task<int> Sum(int n) {
  int total = 0;
  for (int i = 1; i <= n; ++i) total += co_await Value(i);
  co_return total;
}

Task<std::string> Throws() {
  throw std::runtime_error("boom");
  co_return "never";
}

Task<void> Nothing(int* counter) {
  ++*counter;
  co_return;
}

Task<int> AwaitCompletion(Completion<int>* done) { co_return co_await *done; }

TEST(TaskTest, GetSpinHalvesAfterSlowCallsAndComesBackAfterAQuickOne) {
  using internal::kGetSpinMaxNs;
  using internal::kGetSpinMinNs;
  using internal::NextGetSpin;
  EXPECT_EQ(NextGetSpin(kGetSpinMaxNs, 500), kGetSpinMaxNs);
  EXPECT_EQ(NextGetSpin(0, kGetSpinMaxNs), kGetSpinMaxNs);  // slept, quick
  // The slow tail of local calls leaves the spin as it is.
  EXPECT_EQ(NextGetSpin(kGetSpinMaxNs, kGetSpinMaxNs + 1), kGetSpinMaxNs);
  EXPECT_EQ(NextGetSpin(kGetSpinMaxNs / 4, internal::kGetSlowCallNs),
            kGetSpinMaxNs / 4);
  EXPECT_EQ(NextGetSpin(kGetSpinMaxNs, internal::kGetSlowCallNs + 1),
            kGetSpinMaxNs / 2);
  EXPECT_EQ(NextGetSpin(kGetSpinMaxNs / 2, 200'000), kGetSpinMaxNs / 4);
  EXPECT_EQ(NextGetSpin(2 * kGetSpinMinNs - 1, 200'000), 0);
  EXPECT_EQ(NextGetSpin(0, 200'000), 0);
}

// Slow calls halve the spin of the thread that waits on them. (Only slow
// calls: how long a quick one takes is up to the machine, so that it brings
// the spin back is NextGetSpin's test above.)
TEST(TaskTest, GetSpinsLessForSlowCalls) {
  internal::get_spin_ns = internal::kGetSpinMaxNs;
  // Slow calls: answered by another thread a millisecond later, so each
  // takes longer than kGetSlowCallNs however busy the machine is.
  for (int i = 0; i < 3; ++i) {
    Completion<int> done;
    std::thread answer([&done] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      done.Complete(7);
    });
    EXPECT_EQ(*AwaitCompletion(&done).Get(), 7);
    answer.join();
  }
  EXPECT_EQ(internal::get_spin_ns, internal::kGetSpinMaxNs / 8);
  internal::get_spin_ns = internal::kGetSpinMaxNs;
}

TEST(TaskTest, IsLazyUntilAwaited) {
  int counter = 0;
  Task<void> t = Nothing(&counter);
  EXPECT_EQ(counter, 0);
  EXPECT_TRUE(std::move(t).Get().ok());
  EXPECT_EQ(counter, 1);
}

TEST(TaskTest, AwaitChainsReturnValues) {
  absl::StatusOr<int> r = Sum(100).Get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 5050);
}

TEST(TaskTest, ExceptionPropagatesToAwaiter) {
  auto outer = []() -> Task<std::string> {
    try {
      co_return co_await Throws();
    } catch (const std::runtime_error& e) {
      co_return std::string("caught ") + e.what();
    }
  };
  EXPECT_EQ(*outer().Get(), "caught boom");
}

TEST(TaskTest, GetTurnsExceptionsIntoStatus) {
  absl::StatusOr<std::string> r = Throws().Get();
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(r.status().message(), HasSubstr("boom"));

  auto chosen = []() -> Task<int> {
    throw StatusError(absl::NotFoundError("no such thing"));
    co_return 0;
  };
  EXPECT_THAT(chosen().Get(), StatusIs(absl::StatusCode::kNotFound));
}

// Keeps `held` in its coroutine frame until the frame is destroyed.
Task<void> Holding(std::shared_ptr<int> held) {
  ++*held;
  co_return;
}

TEST(TaskTest, DestroyingAnUnstartedTaskFreesItsFrame) {
  auto held = std::make_shared<int>(0);
  std::weak_ptr<int> watch = held;
  {
    Task<void> t = Holding(std::move(held));
    EXPECT_FALSE(watch.expired()) << "the frame holds the argument";
  }
  // The frame (and the argument it owned) is gone, and the body never ran.
  EXPECT_TRUE(watch.expired()) << "the unstarted task's frame leaked";
}

TEST(TaskTest, MoveOnly) {
  static_assert(!std::is_copy_constructible_v<Task<int>>);
  Task<int> a = Value(3);
  Task<int> b = std::move(a);
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(*std::move(b).Get(), 3);
}

TEST(TaskTest, DeepAwaitChainDoesNotOverflowTheStack) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || \
    !defined(__OPTIMIZE__)
  GTEST_SKIP() << "symmetric transfer keeps the stack flat only where the "
                  "compiler emits its tail calls: optimized builds without "
                  "sanitizer instrumentation";
#endif
  // Symmetric transfer: a million sequential awaits use constant stack.
  absl::StatusOr<int> r = []() -> Task<int> {
    int total = 0;
    for (int i = 0; i < 1000000; ++i) total += co_await Value(1);
    co_return total;
  }()
                                      .Get();
  EXPECT_EQ(*r, 1000000);
}

}  // namespace
}  // namespace granary
