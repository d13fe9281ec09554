#include "core/when_all.h"

#include <coroutine>
#include <stdexcept>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

using ::granary::matchers::StatusIs;

namespace granary {
namespace {

Task<int> Value(int v) { co_return v; }

Task<int> Fails() {
  throw StatusError(absl::NotFoundError("nope"));
  co_return 0;
}

// Suspends until Release() resumes it, on the releasing thread.
class Gate {
 public:
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    MutexLock lock(&mu_);
    waiters_.push_back(h);
  }
  void await_resume() const noexcept {}
  size_t waiting() {
    MutexLock lock(&mu_);
    return waiters_.size();
  }
  void Release() {
    std::vector<std::coroutine_handle<>> ws;
    {
      MutexLock lock(&mu_);
      ws.swap(waiters_);
    }
    for (auto h : ws) h.resume();
  }

 private:
  Mutex mu_;
  std::vector<std::coroutine_handle<>> waiters_;
};

Task<int> AfterGate(Gate* gate, int v) {
  co_await *gate;
  co_return v;
}

TEST(WhenAllTest, GathersResultsInOrderWithPerTaskFailures) {
  std::vector<Task<int>> tasks;
  tasks.push_back(Value(1));
  tasks.push_back(Fails());
  tasks.push_back(Value(3));
  absl::StatusOr<std::vector<absl::StatusOr<int>>> all =
      WhenAll(std::move(tasks)).Get();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(*(*all)[0], 1);
  EXPECT_THAT((*all)[1], StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(*(*all)[2], 3);
}

TEST(WhenAllTest, EmptyCompletesAtOnce) {
  auto all = WhenAll(std::vector<Task<int>>()).Get();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

TEST(WhenAllTest, AllTasksRunAtOnceAndTheLastToFinishResumes) {
  Gate gate;
  std::vector<Task<int>> tasks;
  for (int i = 0; i < 8; ++i) tasks.push_back(AfterGate(&gate, i));
  Notification done;
  std::vector<absl::StatusOr<int>> results;
  Detach(WhenAll(std::move(tasks)),
         [&](absl::StatusOr<std::vector<absl::StatusOr<int>>> r) {
           results = std::move(*r);
           done.Notify();
         });
  // Every task started and waits at the gate before any finished.
  EXPECT_EQ(gate.waiting(), 8u);
  EXPECT_FALSE(done.HasBeenNotified());
  std::thread releaser([&] { gate.Release(); });
  done.WaitForNotification();
  releaser.join();
  ASSERT_EQ(results.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(*results[i], i);
}

}  // namespace
}  // namespace granary
