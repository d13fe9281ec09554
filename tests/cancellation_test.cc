// Cancellation in a silo (core/cancel.h): a queued call that is cancelled
// never runs and its caller gets CANCELLED; a running turn sees its token
// fire (checked or awaited); a deadline cancels like a caller; the cancel
// reaches the calls a grain made on the request's behalf; linked sources.
// (tests/cancellation_remote_test.cc: the same through the gateway, gRPC
// and a cluster.)
#include <string>

#include "core/cancel.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cancellation_fixture.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::testing::Contains;
using ::testing::Not;

class CancellationTest : public CancellationFixture {
 protected:
  void SetUp() override {
    SiloFixtureOptions options;
    options.host.gateway = "";
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
  }
};

TEST_F(CancellationTest, AQueuedCallNeverRunsAndItsCallerGetsCancelled) {
  CancellationSource hold;
  Pending busy([&] {
    return Grain("q").Wait(MakeText(""), CancelledBy(hold)).Get().status();
  });
  ASSERT_TRUE(state_.WaitForLog("q:wait"));
  CancellationSource source;
  Pending queued([&] {
    return Grain("q")
        .Record(MakeText("late"), CancelledBy(source))
        .Get()
        .status();
  });
  ASSERT_NO_FATAL_FAILURE(WaitQueued("q", 1));
  source.Cancel();
  // Answered at once, while the grain is still busy.
  EXPECT_THAT(queued.Wait(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(QueuedAt("q"), 1);
  hold.Cancel();
  EXPECT_THAT(busy.Wait(), StatusIs(absl::StatusCode::kCancelled));
  ASSERT_TRUE(state_.WaitForLog("q:saw-cancel"));
  ASSERT_THAT(Grain("q").Record(MakeText("after")).Get(), IsOk());
  EXPECT_THAT(state_.Log(), Not(Contains("q:ran late")));
  EXPECT_THAT(state_.Log(), Contains("q:ran after"));
  EXPECT_EQ(QueuedAt("q"), 0);
}

TEST_F(CancellationTest, ARunningTurnThatChecksItsTokenSeesTheCancel) {
  CancellationSource source;
  Pending poll([&] {
    return Grain("p").Poll(MakeText(""), CancelledBy(source)).Get().status();
  });
  ASSERT_TRUE(state_.WaitForLog("p:poll"));
  source.Cancel();
  EXPECT_THAT(poll.Wait(), StatusIs(absl::StatusCode::kCancelled,
                                    ::testing::HasSubstr("cancelled")));
  ASSERT_TRUE(state_.WaitForLog("p:saw-cancel"));
  // The grain goes on serving.
  EXPECT_THAT(Grain("p").Record(MakeText("next")).Get(), IsOk());
}

TEST_F(CancellationTest, ADeadlineCancelsTheRunningTurn) {
  EXPECT_THAT(
      Grain("d").Wait(MakeText(""), absl::Milliseconds(200)).Get().status(),
      StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_TRUE(state_.WaitForLog("d:saw-cancel"));
}

TEST_F(CancellationTest, TheCancelReachesTheCallsTheGrainMade) {
  CancellationSource source;
  Pending forward([&] {
    return Grain("parent")
        .Forward(MakeText("child"), CancelledBy(source))
        .Get()
        .status();
  });
  ASSERT_TRUE(state_.WaitForLog("child:wait"));
  source.Cancel();
  EXPECT_THAT(forward.Wait(), StatusIs(absl::StatusCode::kCancelled));
  ASSERT_TRUE(state_.WaitForLog("child:saw-cancel"));
}

TEST_F(CancellationTest, ALinkedSourceIsCancelledWithItsParent) {
  CancellationSource parent;
  CancellationSource child(parent.token());
  Pending wait([&] {
    return Grain("linked")
        .Wait(MakeText(""), CancelledBy(child))
        .Get()
        .status();
  });
  ASSERT_TRUE(state_.WaitForLog("linked:wait"));
  parent.Cancel();
  EXPECT_TRUE(child.IsCancelled());
  EXPECT_THAT(wait.Wait(), StatusIs(absl::StatusCode::kCancelled));
  // A source made under a cancelled token starts cancelled.
  CancellationSource late(parent.token());
  EXPECT_TRUE(late.IsCancelled());
}

TEST_F(CancellationTest, ACallCancelledBeforeItIsSentNeverRuns) {
  CancellationSource source;
  source.Cancel();
  EXPECT_THAT(
      Grain("early").Record(MakeText("x"), CancelledBy(source)).Get().status(),
      StatusIs(absl::StatusCode::kCancelled));
  ASSERT_THAT(Grain("early").Record(MakeText("y")).Get(), IsOk());
  EXPECT_THAT(state_.Log(), Not(Contains("early:ran x")));
  // Outside grain code the current token is never cancelled.
  EXPECT_FALSE(CurrentCancellation().IsCancelled());
}

}  // namespace
}  // namespace granary::testing
