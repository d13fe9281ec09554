// Release N+1 of the rolling upgrade test as a grain library:
//   granary-silo --grain_library=libupgrade_v2.so
#include "silo/grain_library.h"
#include "silo/runtime/runtime.h"
#include "tests/upgrade/v2/upgrade_counter.grain.h"

namespace granary::upgradetest {
namespace {

class CounterGrain final : public CounterGrainBase {
 public:
  Task<CounterValue> Add(const AddRequest& request) override {
    state().set_value(state().value() + request.amount());
    co_await WriteState();  // durable before the reply
    co_return Value();
  }
  Task<CounterValue> Get(const GetRequest&) override { co_return Value(); }
  Task<CounterValue> Describe(const DescribeRequest&) override {
    co_return Value();
  }

 private:
  CounterValue Value() const {
    CounterValue v;
    v.set_value(state().value());
    v.set_version(2);
    return v;
  }
};

class InvoiceGrain final : public InvoiceGrainBase {
 public:
  Task<InvoiceTotal> Bill(const BillRequest& request) override {
    state().set_cents(state().cents() + request.cents());
    co_await WriteState();
    InvoiceTotal total;
    total.set_cents(state().cents());
    co_return total;
  }
  Task<InvoiceTotal> Remind(const RemindRequest&) override {
    co_await RegisterReminder("fee", absl::Seconds(1), absl::Seconds(1));
    InvoiceTotal total;
    total.set_cents(state().cents());
    co_return total;
  }
  Task<void> ReceiveReminder(const ReminderTick&) override {
    state().set_cents(state().cents() + 1);
    co_await WriteState();
  }
};

}  // namespace
}  // namespace granary::upgradetest

GRANARY_GRAIN_LIBRARY(upgrade_v2, [](granary::silo::Runtime& runtime) {
  absl::Status s = runtime.AddGrain<granary::upgradetest::CounterGrain>();
  if (!s.ok()) return s;
  return runtime.AddGrain<granary::upgradetest::InvoiceGrain>();
});
