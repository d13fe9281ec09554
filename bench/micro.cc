// granary-micro: Google Benchmark measurements of single runtime mechanisms,
// in isolation from scheduling noise (granary-bench measures whole calls).
//
//   build/bin/granary-micro --benchmark_repetitions=5
//
// BM_FilterChain/N: one call's way through N call filters that pass it
// (silo/runtime/call_filter.h), the per-call cost an empty filter chain
// adds to a grain call. BM_TaskFrame: one detached Task coroutine started
// and finished (its frame allocated and freed), the unit of every grain
// method and filter.
#include <vector>

#include "benchmark/benchmark.h"
#include "core/grain_id.h"
#include "core/grain_interface.h"
#include "core/request_context.h"
#include "core/task.h"
#include "silo/runtime/call_filter.h"

namespace granary {
namespace {

Task<absl::Status> Pass(silo::CallFilterContext&) {
  co_return absl::OkStatus();
}

void CountFinish(void* owner, CallBase*, const void*, bool, absl::Status s) {
  if (s.ok()) ++*static_cast<int64_t*>(owner);
}

void BM_FilterChain(benchmark::State& state) {
  std::vector<silo::CallFilter> filters(static_cast<size_t>(state.range(0)),
                                        silo::CallFilter(&Pass));
  const GrainId target("granary.micro.Grain", "key");
  MethodInfo method{};
  method.name = "Get";
  RequestContext context;
  int64_t passed = 0;
  for (auto _ : state) {
    silo::FilterRun* run =
        silo::FilterRun::Start(filters, target, method, nullptr, {}, context,
                               &CountFinish, &passed, nullptr, nullptr);
    benchmark::DoNotOptimize(run);
  }
  if (passed != state.iterations()) state.SkipWithError("a call did not pass");
}
BENCHMARK(BM_FilterChain)->Arg(0)->Arg(1)->Arg(2)->Arg(4);

Task<int> Answer(int x) { co_return x + 1; }

void BM_TaskFrame(benchmark::State& state) {
  int64_t sum = 0;
  for (auto _ : state) {
    Task<int>::Handle h = Answer(41).Release();
    h.resume();
    sum += h.promise().TakeResult();
    h.destroy();
  }
  if (sum != 42 * state.iterations()) state.SkipWithError("wrong result");
}
BENCHMARK(BM_TaskFrame);

}  // namespace
}  // namespace granary

BENCHMARK_MAIN();
