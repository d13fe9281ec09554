// File: tests/silo_fixture.h
// -----------------------------------------------------------------------------
// The in-process silo of the integration tests: a SiloHost (silo/silo_host.h)
// hosting the test grains (tests/test_grains.h) that report into `state_`,
// in process (no silo endpoint or HTTP listens), with memory storage and,
// unless told otherwise, a client gateway on 127.0.0.1:0.
//
//   class ClientTest : public SiloFixture {
//    protected:
//     void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartSilo()); }
//   };
//   TEST_F(ClientTest, X) { ... gateway_->address() ... silo_->Get<...>(k) }
//
// A test may stop the silo and start another (StopSilo, then StartSilo with
// other options, e.g. the same gateway address). TearDown stops whatever
// runs, gracefully, as SiloHost::Stop does: the grains deactivate first (so
// the gateway answers what it still waits for), then the gateway.
//
// Threading: the fixture is used from the test's thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "core/clock.h"
#include "gtest/gtest.h"
#include "silo/gateway/gateway_server.h"
#include "silo/runtime/runtime.h"
#include "silo/silo_host.h"
#include "storage/memory_storage.h"
#include "tests/test_grains.h"

namespace granary::testing {

struct SiloFixtureOptions {
  // The host's options: two workers, a 1.5 s graceful stop (so a 500 ms
  // deactivation budget), the gateway on 127.0.0.1:0, no HTTP endpoint;
  // the rest as SiloHostOptions. An empty `host.gateway`: no gateway.
  silo::SiloHostOptions host = [] {
    silo::SiloHostOptions o;
    o.workers = 2;
    o.shutdown_timeout = absl::Milliseconds(1500);
    o.gateway = "127.0.0.1:0";
    o.http = "";
    return o;
  }();
  // The silo's id, and its runtime's name.
  std::string name = "test-silo";
  // The silo's clock (nullptr: the system clock), and a reminder table of
  // the test's (nullptr: one in memory of the silo's own); both must
  // outlive the silo.
  Clock* clock = nullptr;
  storage::ReminderTable* reminders = nullptr;
  // Runs once the test grains are added, before the silo starts: for what
  // must be set before Runtime::Start (e.g. reminders().SetRanges). Unset:
  // none.
  std::function<void(silo::Runtime&)> before_start;
};

class SiloFixture : public ::testing::Test {
 protected:
  void TearDown() override { StopSilo(); }

  // Starts the silo with the test grains, and its gateway; fails the test
  // (fatally: wrap in ASSERT_NO_FATAL_FAILURE) when it does not start.
  void StartSilo(SiloFixtureOptions options = {}) {
    silo::SiloEnvironment env;
    env.clock = options.clock;
    env.in_process = silo::InProcessNetwork::Alone(options.name);
    storage::ReminderTable* table = options.reminders;
    env.providers.storage["test"] = [table](const silo::SiloHostOptions&)
        -> absl::StatusOr<silo::StorageStores> {
      silo::StorageStores stores;
      stores.grain_state = std::make_shared<storage::MemoryStorage>();
      if (table != nullptr) {
        stores.reminders = std::shared_ptr<storage::ReminderTable>(
            table, [](storage::ReminderTable*) {});  // the test's
      } else {
        stores.reminders = std::make_shared<storage::MemoryReminderTable>();
      }
      return stores;
    };
    options.host.storage = "test";
    host_ = std::make_unique<silo::SiloHost>(options.host, std::move(env));
    host_->AddGrains([this, before = std::move(options.before_start)](
                         silo::Runtime& silo) -> absl::Status {
      GRANARY_RETURN_IF_ERROR(AddTestGrains(silo, &state_));
      if (before) before(silo);
      return absl::OkStatus();
    });
    const absl::Status started = host_->Start();
    ASSERT_TRUE(started.ok()) << started;
    silo_ = host_->silo();
    gateway_ = host_->gateway();
    if (!options.host.gateway.empty()) {
      ASSERT_NE(gateway_, nullptr);
      ASSERT_GT(gateway_->port(), 0);
    }
  }

  // Stops and frees the silo and its gateway. Idempotent.
  void StopSilo() {
    if (host_ != nullptr) host_->Stop();
    silo_ = nullptr;
    gateway_ = nullptr;
    host_.reset();
  }

  TestState state_;
  std::unique_ptr<silo::SiloHost> host_;
  // The host's runtime and gateway (nullptr when stopped, or without one).
  silo::Runtime* silo_ = nullptr;
  silo::GatewayServer* gateway_ = nullptr;
};

}  // namespace granary::testing
