// Stateless workers (GrainOptions.stateless_worker): a hot spot of many
// callers on one grain spreads over a pool of activations on the silo, with
// no directory entry; the pool is bounded by max_local_workers; a stateless
// worker that keeps persistent state anyway fails its calls.
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/silo_fixture.h"
#include "tests/test_grains.granary.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;

constexpr char kHotspot[] = "granary.testing.Hotspot";

class StatelessWorkerTest : public SiloFixture {
 protected:
  void SetUp() override {
    SiloFixtureOptions options;
    options.name = "worker-silo";
    options.host.gateway = "";
    ASSERT_NO_FATAL_FAILURE(StartSilo(options));
  }
  // Workers of Hotspot grains, and the calls queued at them.
  std::pair<size_t, size_t> Pool() {
    size_t workers = 0;
    size_t queued = 0;
    silo_->internals().catalog().CountWorkers(kHotspot, &workers, &queued);
    return {workers, queued};
  }
};

TEST_F(StatelessWorkerTest, SixtyFourCallersOnOneKeySpreadOverThePool) {
  // 64 callers at once on one grain; every worker holds its thread at the
  // gate, so all 64 calls are in the pool before any finishes.
  std::vector<std::thread> callers;
  std::vector<std::string> served(64);
  for (int i = 0; i < 64; ++i) {
    callers.emplace_back([this, i, &served] {
      absl::StatusOr<Text> r =
          silo_->Get<HotspotRef>("hot").Work(MakeText("gate")).Get();
      served[static_cast<size_t>(i)] =
          r.ok() ? r->text() : r.status().ToString();
    });
  }
  // Two workers run (the silo has two threads) and wait at the gate; the
  // other calls queue.
  ASSERT_TRUE(state_.WaitUntil([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    int started = 0;
    for (const auto& e : state_.log) started += e == "work-start" ? 1 : 0;
    return started == 2;
  }));
  for (int tries = 0; Pool().second != 62 && tries < 6000; ++tries) {
    absl::SleepFor(absl::Milliseconds(10));  // the callers are still sending
  }
  EXPECT_EQ(Pool(), std::make_pair(size_t{4}, size_t{62}));
  // No directory entry, no placement: the pool is this silo's own.
  EXPECT_EQ(silo_->internals().DirectoryEntries(), 0u);
  EXPECT_EQ(silo_->ActivationCount(), 4u);
  state_.OpenGate();
  for (std::thread& t : callers) t.join();

  std::map<std::string, int> per_worker;
  for (const std::string& s : served) ++per_worker[s];
  ASSERT_EQ(per_worker.size(), 4u) << ::testing::PrintToString(per_worker);
  for (const auto& [worker, calls] : per_worker) {
    EXPECT_GE(calls, 10) << "worker " << worker << " served " << calls;
  }
  EXPECT_EQ(state_.Count("work-start"), 64);
  EXPECT_EQ(silo_->internals().DirectoryEntries(), 0u);
}

TEST_F(StatelessWorkerTest, AnIdleWorkerServesSequentialCallers) {
  // One caller after another: the first worker is idle each time, so the
  // pool never grows.
  std::set<std::string> workers;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<Text> r =
        silo_->Get<HotspotRef>("calm").Work(MakeText("go")).Get();
    ASSERT_THAT(r, IsOk());
    workers.insert(r->text());
  }
  EXPECT_EQ(workers.size(), 1u);
  EXPECT_EQ(Pool().first, 1u);
  // Different keys are different grains with pools of their own.
  ASSERT_THAT(silo_->Get<HotspotRef>("other").Work(MakeText("go")).Get(),
              IsOk());
  EXPECT_EQ(Pool().first, 2u);
}

TEST_F(StatelessWorkerTest, PersistentStateInAStatelessWorkerIsRefused) {
  EXPECT_THAT(
      silo_->Get<StatefulWorkerRef>("s").Work(MakeText("x")).Get().status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               ::testing::HasSubstr("stateless worker")));
}

}  // namespace
}  // namespace granary::testing
