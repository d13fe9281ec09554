// The lifecycle of a silo host (silo/lifecycle.h): stages start rising and
// stop falling, a failure ends the start, and parts may subscribe more.
#include "silo/lifecycle.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary::silo {
namespace {

using ::testing::ElementsAre;

class LifecycleTest : public ::testing::Test {
 protected:
  // A part that records its start and stop in `trail_`.
  void Part(Stage stage, const std::string& name, bool fails = false) {
    lifecycle_.Subscribe(
        stage, name,
        [this, name, fails]() -> absl::Status {
          trail_.push_back("start " + name);
          if (fails) return absl::UnavailableError(name + " is down");
          return absl::OkStatus();
        },
        [this, name] { trail_.push_back("stop " + name); });
  }

  Lifecycle lifecycle_;
  std::vector<std::string> trail_;
};

TEST_F(LifecycleTest, StagesStartRisingAndStopFalling) {
  // Subscribed out of order: the stage decides, then the order subscribed.
  Part(Stage::kListeners, "gateway");
  Part(Stage::kStores, "stores");
  Part(Stage::kListeners, "http");
  Part(Stage::kRuntime, "runtime");
  ASSERT_TRUE(lifecycle_.Start().ok());
  EXPECT_EQ(lifecycle_.reached(), static_cast<int>(Stage::kListeners));
  lifecycle_.Stop();
  lifecycle_.Stop();  // idempotent
  EXPECT_THAT(trail_,
              ElementsAre("start stores", "start runtime", "start gateway",
                          "start http", "stop http", "stop gateway",
                          "stop runtime", "stop stores"));
}

TEST_F(LifecycleTest, AFailedStartEndsTheStartAndStopStillRunsEveryStop) {
  Part(Stage::kStores, "stores");
  Part(Stage::kSiloEndpoint, "endpoint", /*fails=*/true);
  Part(Stage::kRuntime, "runtime");
  const absl::Status started = lifecycle_.Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(started.message(), "endpoint is down");
  EXPECT_THAT(trail_, ElementsAre("start stores", "start endpoint"));
  EXPECT_FALSE(lifecycle_.Start().ok());  // once
  trail_.clear();
  // Each stop undoes what its part made (here: records that it ran).
  lifecycle_.Stop();
  EXPECT_THAT(trail_,
              ElementsAre("stop runtime", "stop endpoint", "stop stores"));
}

TEST_F(LifecycleTest, AStartMaySubscribeLaterStages) {
  lifecycle_.Subscribe(Stage::kStores, "provider", [this] {
    trail_.push_back("start provider");
    Part(Stage::kCluster, "router");  // a later stage
    lifecycle_.Subscribe(Stage::kHandoff, "handoff", nullptr,
                         [this] { trail_.push_back("stop handoff"); });
    return absl::OkStatus();
  });
  Part(Stage::kActive, "ready");
  Part(Stage::kRuntime, "runtime");
  ASSERT_TRUE(lifecycle_.Start().ok());
  lifecycle_.Stop();
  EXPECT_THAT(trail_,
              ElementsAre("start provider", "start runtime", "start router",
                          "start ready", "stop ready", "stop handoff",
                          "stop router", "stop runtime"));
}

TEST(LifecycleDeathTest, SubscribingToAStageAlreadyEnteredIsABug) {
  EXPECT_DEATH(
      {
        Lifecycle lifecycle;
        lifecycle.Subscribe(Stage::kRuntime, "late", [&lifecycle] {
          lifecycle.Subscribe(Stage::kStores, "too late", nullptr);
          return absl::OkStatus();
        });
        (void)lifecycle.Start();
      },
      "after it ran");
}

TEST(StageNameTest, EveryStageHasAName) {
  for (Stage s :
       {Stage::kStores, Stage::kSiloEndpoint, Stage::kRuntime, Stage::kCluster,
        Stage::kPeerCalls, Stage::kListeners, Stage::kMembership,
        Stage::kClientCalls, Stage::kGrains, Stage::kHandoff, Stage::kActive}) {
    EXPECT_NE(StageName(s), "unknown");
  }
}

}  // namespace
}  // namespace granary::silo
