#include "core/cancel.h"

#include <atomic>
#include <coroutine>
#include <thread>
#include <vector>

#include "core/call.h"
#include "core/status.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

// A scope that counts its OnCancelled runs.
class Counted final : public CancelState {
 public:
  explicit Counted(std::atomic<int>* fired) : fired_(fired) {}

 private:
  void OnCancelled() override { fired_->fetch_add(1); }
  std::atomic<int>* fired_;
};

TEST(CancelStateTest, CancellingAParentCancelsItsChildrenOnce) {
  std::atomic<int> fired{0};
  auto* parent = new Counted(&fired);
  auto* child = new Counted(&fired);
  auto* grandchild = new Counted(&fired);
  ASSERT_TRUE(child->Adopt(parent));
  ASSERT_TRUE(grandchild->Adopt(child));
  parent->Cancel();
  parent->Cancel();  // idempotent
  EXPECT_TRUE(child->cancelled());
  EXPECT_TRUE(grandchild->cancelled());
  EXPECT_EQ(fired.load(), 3);
  // Cancelling a child never reaches its parent.
  auto* other_parent = new Counted(&fired);
  auto* other_child = new Counted(&fired);
  ASSERT_TRUE(other_child->Adopt(other_parent));
  other_child->Cancel();
  EXPECT_FALSE(other_parent->cancelled());
  for (CancelState* s :
       {grandchild, child, parent, other_child, other_parent}) {
    s->Release();
  }
}

TEST(CancelStateTest, AdoptionUnderACancelledParentIsRefused) {
  std::atomic<int> fired{0};
  auto* parent = new Counted(&fired);
  parent->Cancel();
  auto* child = new Counted(&fired);
  EXPECT_FALSE(child->Adopt(parent));
  EXPECT_FALSE(child->cancelled());  // the caller cancels it itself
  EXPECT_TRUE(child->Adopt(nullptr));
  child->Release();
  parent->Release();
}

TEST(CancelStateTest, AChildReleasedBeforeTheCancelIsNotTouched) {
  std::atomic<int> fired{0};
  auto* parent = new Counted(&fired);
  for (int i = 0; i < 10; ++i) {
    auto* child = new Counted(&fired);
    ASSERT_TRUE(child->Adopt(parent));
    child->Release();  // unlinks itself
  }
  parent->Cancel();
  EXPECT_EQ(fired.load(), 1);
  parent->Release();
}

class Forwarder final : public CancelForwarder {
 public:
  void ForwardCancel(uint64_t id) override { ids.push_back(id); }
  std::vector<uint64_t> ids;
};

TEST(CancelStateTest, TheForwarderHearsOfTheCancelUntilCleared) {
  CancellationSource source;
  Forwarder forwarder;
  ASSERT_TRUE(source.token().state()->SetForwarder(&forwarder, 7));
  source.Cancel();
  EXPECT_EQ(forwarder.ids, std::vector<uint64_t>{7});
  EXPECT_EQ(source.token().state()->ClearForwarder(), &forwarder);
  EXPECT_FALSE(source.token().state()->SetForwarder(&forwarder, 8));

  CancellationSource cleared;
  Forwarder quiet;
  ASSERT_TRUE(cleared.token().state()->SetForwarder(&quiet, 1));
  EXPECT_EQ(cleared.token().state()->ClearForwarder(), &quiet);
  cleared.Cancel();
  EXPECT_TRUE(quiet.ids.empty());
}

// A coroutine that awaits `token` and counts when it resumes.
struct Detached {
  struct promise_type {
    Detached get_return_object() { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
};

Detached AwaitCancel(CancellationToken token, std::atomic<int>* resumed) {
  co_await token;
  resumed->fetch_add(1);
}

TEST(CancellationTokenTest, AwaitingResumesOnCancelOrAtOnce) {
  std::atomic<int> resumed{0};
  CancellationSource source;
  AwaitCancel(source.token(), &resumed);
  AwaitCancel(source.token(), &resumed);
  EXPECT_EQ(resumed.load(), 0);
  source.Cancel();  // resumes both here, outside grain code
  EXPECT_EQ(resumed.load(), 2);
  AwaitCancel(source.token(), &resumed);  // already cancelled
  EXPECT_EQ(resumed.load(), 3);
}

Detached AwaitNeverCancelled(absl::StatusCode* code) {
  try {
    co_await CancellationToken();
  } catch (const StatusError& e) {
    *code = e.status().code();
  }
}

TEST(CancellationTokenTest, AwaitingATokenNothingCanCancelIsAnError) {
  absl::StatusCode code = absl::StatusCode::kOk;
  AwaitNeverCancelled(&code);
  EXPECT_EQ(code, absl::StatusCode::kFailedPrecondition);
}

TEST(CancellationTokenTest, ThrowIfCancelledThrowsCancelled) {
  CancellationSource source;
  CancellationToken token = source.token();
  EXPECT_NO_THROW(token.ThrowIfCancelled());
  EXPECT_FALSE(CancellationToken().IsCancelled());
  source.Cancel();
  EXPECT_TRUE(token.IsCancelled());
  try {
    token.ThrowIfCancelled();
    ADD_FAILURE() << "no exception";
  } catch (const StatusError& e) {
    EXPECT_EQ(e.status().code(), absl::StatusCode::kCancelled);
  }
}

// Cancels race children that come and go, and waiters that come, on other
// threads (for ThreadSanitizer).
TEST(CancelStateTest, CancelRacesChildrenComingAndGoing) {
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> fired{0};
    auto* parent = new Counted(&fired);
    std::atomic<int> resumed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          if (t == 2) {
            CancelRef ref(parent);
            AwaitCancel(CancellationToken(ref), &resumed);
            continue;
          }
          auto* child = new Counted(&fired);
          if (!child->Adopt(parent)) child->Cancel();
          child->Release();
        }
      });
    }
    parent->Cancel();
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(resumed.load(), 50);  // each waiter resumed exactly once
    parent->Release();
  }
}

}  // namespace
}  // namespace granary
