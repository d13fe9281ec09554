// The per-activation mailbox bound (--max_mailbox) in one process: requests
// past it fail at once; a grain whose one-way call finds a full mailbox
// waits before its next turn, for room or for max_pushback_wait.
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/detach.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/runtime/runtime.h"
#include "tests/silo_fixture.h"
#include "tests/test_grains.h"

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;

namespace granary::testing {
namespace {

using ::testing::HasSubstr;

// A silo whose activations queue at most three calls.
class MailboxBoundTest : public SiloFixture {
 protected:
  void SetUp() override {
    SiloFixtureOptions options;
    options.host.max_mailbox = 3;
    options.host.gateway = "";
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
  }
};

TEST_F(MailboxBoundTest, RequestsPastTheBoundFailAtOnceAndAreCounted) {
  auto grain = silo_->Get<TurnsRef>("busy");
  Notification block_done;
  Detach(grain.Block(MakeText("")),
         [&](absl::StatusOr<Text>) { block_done.Notify(); });
  ASSERT_TRUE(state_.WaitForLog("block-start"));  // running, not queued
  // Three requests wait behind Block's turn: the mailbox is full.
  std::vector<Notification> queued(3);
  std::vector<absl::StatusOr<Text>> queued_replies(3);
  for (int i = 0; i < 3; ++i) {
    Detach(grain.Leaf(MakeText(std::to_string(i))),
           [&, i](absl::StatusOr<Text> r) {
             queued_replies[i] = std::move(r);
             queued[i].Notify();
           });
  }
  absl::StatusOr<Text> refused = grain.Leaf(MakeText("one too many")).Get();
  EXPECT_THAT(refused.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                         HasSubstr("--max_mailbox")));
  // Another grain is not affected.
  EXPECT_TRUE(silo_->Get<TurnsRef>("idle").Leaf(MakeText("")).Get().ok());
  EXPECT_THAT(silo_->metrics_registry().Render(),
              HasSubstr("granary_mailbox_full_total{kind=\"request\"} 1\n"));
  // Even a method that would interleave is refused while the mailbox is
  // full; nothing queued was dropped or answered.
  EXPECT_THAT(grain.Release(MakeText("")).Get().status(),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_FALSE(block_done.HasBeenNotified());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(queued[i].HasBeenNotified());
  // Stopping answers every call still held (before the locals go).
  StopSilo();
  block_done.WaitForNotification();
  for (int i = 0; i < 3; ++i) {
    queued[i].WaitForNotification();
    EXPECT_THAT(queued_replies[i].status(),
                ::testing::Not(StatusIs(absl::StatusCode::kResourceExhausted)));
  }
}

// Grains of a silo with a small --max_mailbox sending one-way calls to a
// grain held busy by the note "gate" (on a worker of its own).
class MailboxPushbackTest : public SiloFixture {
 protected:
  // The gate holds a worker, which the silo's stop would wait for.
  void TearDown() override {
    state_.OpenGate();
    SiloFixture::TearDown();
  }

  void Start(int max_mailbox, absl::Duration max_wait) {
    SiloFixtureOptions options;
    options.host.max_mailbox = max_mailbox;
    options.host.workers = 4;  // one is held by the gate
    options.host.max_pushback_wait = max_wait;
    options.host.gateway = "";
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
    silo_->Get<TurnsRef>("target").Note(MakeText("gate"));
    ASSERT_TRUE(state_.WaitForLog("note:gate"));
    to_.set_peer("target");
  }

  int64_t Deactivated() {
    return Sample(
        "granary_activations_deactivated_total{type=\"granary.testing.Turns\","
        "reason=\"shutdown\"} ");
  }
  int64_t Pushbacks() { return Sample("granary_mailbox_pushback_total "); }
  int64_t Sample(const std::string& name) {
    const std::string text = silo_->metrics_registry().Render();
    const size_t at = text.find("\n" + name);
    if (at == std::string::npos) return -1;
    return std::atoll(text.c_str() + at + 1 + name.size());
  }
  // Polls `done` for up to 30 s.
  static bool WaitFor(const std::function<bool()>& done) {
    for (int i = 0; i < 3000; ++i) {
      if (done()) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return done();
  }

  PeerRequest to_;
};

// A grain whose one-way call finds its target's mailbox full is pushed back
// on: its next turn waits until the target is down to half the bound, while
// other grains go on; nothing sent is dropped.
TEST_F(MailboxPushbackTest, AGrainSendingIntoAFullMailboxWaitsForRoom) {
  ASSERT_NO_FATAL_FAILURE(Start(3, absl::Minutes(5)));  // only room wakes it
  // Three notes fill the mailbox; the fourth is queued past the bound
  // (counted), and its sender's next turn waits.
  auto sender = silo_->Get<TurnsRef>("sender");
  for (int i = 0; i < 4; ++i) ASSERT_THAT(sender.SendNote(to_).Get(), IsOk());
  EXPECT_THAT(silo_->metrics_registry().Render(),
              HasSubstr("granary_mailbox_full_total{kind=\"one_way\"} 1\n"));
  EXPECT_TRUE(WaitFor([&] { return Pushbacks() == 1; }));
  Notification fifth;
  Detach(sender.SendNote(to_), [&](absl::StatusOr<Text>) { fifth.Notify(); });
  // Other grains go on meanwhile (on the other workers).
  EXPECT_THAT(silo_->Get<TurnsRef>("other").Leaf(MakeText("")).Get(), IsOk());
  EXPECT_FALSE(fifth.HasBeenNotified());
  EXPECT_EQ(state_.Count("send-note"), 4);
  // Room again: the sender goes on, and every note runs.
  state_.OpenGate();
  fifth.WaitForNotification();
  EXPECT_TRUE(state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    int notes = 0;
    for (const auto& e : state_.log) notes += e == "note:sent" ? 1 : 0;
    return notes == 5;
  }));
  EXPECT_EQ(Pushbacks(), 1);
}

// The wait is bounded: two grains that filled each other's mailboxes
// would otherwise wait for good.
TEST_F(MailboxPushbackTest, TheWaitIsBounded) {
  ASSERT_NO_FATAL_FAILURE(Start(1, absl::Milliseconds(20)));
  auto sender = silo_->Get<TurnsRef>("sender");
  // The target stays full: each turn after the first is followed by a wait
  // that only the bound ends.
  for (int i = 0; i < 4; ++i) ASSERT_THAT(sender.SendNote(to_).Get(), IsOk());
  EXPECT_TRUE(WaitFor([&] { return Pushbacks() == 3; })) << Pushbacks();
  state_.OpenGate();
}

// Stopping the silo wakes a waiting grain, which deactivates although its
// target is still full.
TEST_F(MailboxPushbackTest, StoppingWakesAWaitingGrain) {
  ASSERT_NO_FATAL_FAILURE(Start(1, absl::Minutes(5)));
  auto sender = silo_->Get<TurnsRef>("sender");
  for (int i = 0; i < 2; ++i) ASSERT_THAT(sender.SendNote(to_).Get(), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Pushbacks() == 1; }));
  std::thread stopper([this] { silo_->Stop(); });
  EXPECT_TRUE(WaitFor([&] { return Deactivated() == 1; }));
  state_.OpenGate();
  stopper.join();
}

}  // namespace
}  // namespace granary::testing
