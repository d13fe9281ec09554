// File: examples/counter_grain.h
// -----------------------------------------------------------------------------
// Example grains: granary.examples.Counter and granary.examples.Ping (and
// AddExampleGrains, which also registers BankAccount, Alarm and Chat).
//
//   silo.AddGrain<granary::examples::CounterGrain>();
//   silo.AddGrain<granary::examples::PingGrain>();
// or, for every example grain at once:
//   GRANARY_RETURN_IF_ERROR(granary::examples::AddExampleGrains(silo));
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "examples/counter.grain.h"
#include "examples/ping.grain.h"

namespace granary::silo {
class Runtime;
}  // namespace granary::silo

namespace granary::examples {

// A counter. Non-persistent: the value starts at 0 on each activation. An
// Add or Bump whose sum does not fit in an int64 fails OUT_OF_RANGE and
// leaves the value alone.
class CounterGrain final : public CounterGrainBase {
 public:
  Task<CounterValue> Add(const AddRequest& request) override;
  Task<CounterValue> Get(const GetRequest& request) override;
  Task<void> Bump(const AddRequest& request) override;

 private:
  int64_t value_ = 0;
};

class PingGrain final : public PingGrainBase {
 public:
  Task<PingReply> Ping(const PingRequest& request) override;
  Task<RelayReply> Relay(const RelayRequest& request) override;
};

absl::Status AddExampleGrains(silo::Runtime& silo);

}  // namespace granary::examples
