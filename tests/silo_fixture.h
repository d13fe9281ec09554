// File: tests/silo_fixture.h
// -----------------------------------------------------------------------------
// The in-process silo of the integration tests: a `Silo` hosting the test
// grains (tests/test_grains.h) that report into `state_`, and, unless told
// otherwise, a `GatewayServer` in front of it on 127.0.0.1:0.
//
//   class ClientTest : public SiloFixture {
//    protected:
//     void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartSilo()); }
//   };
//   TEST_F(ClientTest, X) { ... gateway_->address() ... silo_->Get<...>(k) }
//
// A test may stop the silo and start another (StopSilo, then StartSilo with
// other options, e.g. the same gateway address). TearDown stops whatever
// runs: the silo first (it answers what its gateway still waits for), then
// the gateway.
//
// Threading: the fixture is used from the test's thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rpc/limits.h"
#include "silo/gateway/gateway_server.h"
#include "silo/runtime/silo.h"
#include "tests/test_grains.h"

namespace granary::testing {

struct SiloFixtureOptions {
  // Name "test-silo", two workers, a 500 ms shutdown; the rest as SiloOptions
  // (a null clock is the system clock).
  silo::SiloOptions silo = [] {
    silo::SiloOptions o;
    o.name = "test-silo";
    o.workers = 2;
    o.shutdown_timeout = absl::Milliseconds(500);
    return o;
  }();
  // A gateway in front of the silo, and its settings.
  bool gateway = true;
  std::string gateway_address = "127.0.0.1:0";
  int max_message_bytes = silo::GatewayServer::kDefaultMaxMessageBytes;
  int max_in_flight = silo::GatewayServer::kDefaultMaxInFlight;
  // Bytes one gateway-protocol stream may hold; 0: the gateway's default.
  int64_t max_connection_bytes = 0;
  // Runs once the test grains are added, before the silo starts: for what
  // must be set before Silo::Start (e.g. reminders().SetRanges). Unset: none.
  std::function<void(silo::Silo&)> before_start;
};

class SiloFixture : public ::testing::Test {
 protected:
  void TearDown() override { StopSilo(); }

  // Starts the silo with the test grains, and its gateway; fails the test
  // (fatally: wrap in ASSERT_NO_FATAL_FAILURE) when either does not start.
  void StartSilo(SiloFixtureOptions options = {}) {
    silo_ = std::make_unique<silo::Silo>(options.silo);
    ASSERT_TRUE(AddTestGrains(*silo_, &state_).ok());
    if (options.before_start) options.before_start(*silo_);
    ASSERT_TRUE(silo_->Start().ok());
    if (!options.gateway) return;
    gateway_ = std::make_unique<silo::GatewayServer>(
        silo_.get(), options.gateway_address, options.max_message_bytes,
        options.max_in_flight);
    if (options.max_connection_bytes > 0) {
      gateway_->set_limits(rpc::ServerLimits{}, options.max_connection_bytes,
                           16384);
    }
    ASSERT_TRUE(gateway_->Start().ok());
    ASSERT_GT(gateway_->port(), 0);
  }

  // Stops and frees the silo, then the gateway. Idempotent.
  void StopSilo() {
    if (silo_ != nullptr) silo_->Stop();
    if (gateway_ != nullptr) gateway_->Stop();
    gateway_.reset();
    silo_.reset();
  }

  TestState state_;
  std::unique_ptr<silo::Silo> silo_;
  std::unique_ptr<silo::GatewayServer> gateway_;
};

}  // namespace granary::testing
