// File: tests/reminder_fixture.h
// -----------------------------------------------------------------------------
// What the reminder suites (tests/reminder_test.cc,
// tests/reminder_range_test.cc) share: a silo hosting the test grains
// (tests/silo_fixture.h) without a gateway, on a reminder table of the
// test's and a FakeClock, and the ticks the test grains saw.
//
//   class MyReminderTest : public ReminderFixture {};
//   TEST_F(MyReminderTest, X) {
//     ASSERT_NO_FATAL_FAILURE(StartSiloOn(&table));
//     ... silo_->Get<RemindRef>("k").Register(Reminder("r", 1000, 1000)) ...
//     clock_.Advance(absl::Seconds(1));
//     ASSERT_TRUE(WaitForTicks("k/r", 1));
//   }
//
// Threading: the fixture is used from the test's thread; the tick counts
// are read under `state_.mu`, which the grains write them under.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/sync.h"
#include "gtest/gtest.h"
#include "silo/runtime/runtime.h"
#include "storage/reminder_table.h"
#include "tests/silo_fixture.h"
#include "tests/test_grains.h"

namespace granary::testing {

// A silo without a gateway on a fake clock, and the ticks the test grains
// saw.
class ReminderFixture : public SiloFixture {
 protected:
  // A silo on `table` and clock_; `before_start` as in SiloFixtureOptions.
  void StartSiloOn(storage::ReminderTable* table,
                   std::function<void(silo::Runtime&)> before_start = nullptr) {
    SiloFixtureOptions options;
    options.name = "reminder-silo";
    options.clock = &clock_;
    options.reminders = table;
    options.host.shutdown_timeout = absl::Seconds(15);  // 5 s to deactivate
    options.host.gateway = "";
    options.before_start = std::move(before_start);
    ASSERT_NO_FATAL_FAILURE(SiloFixture::StartSilo(options));
  }

  int Ticks(const std::string& key) {
    MutexLock lock(&state_.mu);
    auto it = state_.reminder_ticks.find(key);
    return it == state_.reminder_ticks.end() ? 0 : it->second;
  }
  bool WaitForTicks(const std::string& key, int n) {
    return state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      auto it = state_.reminder_ticks.find(key);
      return it != state_.reminder_ticks.end() && it->second >= n;
    });
  }

  FakeClock clock_;  // outlives the silo: TearDown stops and frees it
};

}  // namespace granary::testing
