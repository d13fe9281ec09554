// Release N of the rolling upgrade test as a grain library:
//   granary-silo --grain_library=libupgrade_v1.so
#include "silo/grain_library.h"
#include "silo/runtime/runtime.h"
#include "tests/upgrade/v1/upgrade_counter.grain.h"

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

 private:
  CounterValue Value() const {
    CounterValue v;
    v.set_value(state().value());
    v.set_version(1);
    return v;
  }
};

}  // namespace
}  // namespace granary::upgradetest

GRANARY_GRAIN_LIBRARY(upgrade_v1, [](granary::silo::Runtime& runtime) {
  return runtime.AddGrain<granary::upgradetest::CounterGrain>();
});
