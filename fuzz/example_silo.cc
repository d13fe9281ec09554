#include <cstdio>
#include <cstdlib>

#include "examples/counter_grain.h"
#include "fuzz/fuzz_support.h"
#include "silo/runtime/runtime.h"
#include "silo/silo_host.h"

namespace granary::fuzz {

// A SiloHost in process (nothing listens), with the example grains and
// memory storage; the fuzzers drive its runtime directly.
silo::Runtime& ExampleSilo() {
  // Reachable from here for as long as the process runs (so the leak
  // checker does not count it).
  static silo::SiloHost* const host = [] {
    silo::SiloHostOptions options;
    options.gateway = "";
    options.http = "";
    options.storage = "memory";
    options.workers = 2;
    options.idle_spin = 0;  // the fuzzer's own thread needs the cores
    options.idle_timeout = absl::Seconds(5);
    options.collection_period = absl::Seconds(1);
    options.min_reminder_period = absl::Hours(1);
    options.max_activations = 20000;
    silo::SiloEnvironment env;
    env.in_process = silo::InProcessNetwork::Alone("fuzz-silo");
    // Lives as long as the process: the fuzzers never stop it.
    auto* host = new silo::SiloHost(options, std::move(env));
    host->AddGrains(examples::AddExampleGrains);
    if (absl::Status started = host->Start(); !started.ok()) {
      std::fprintf(stderr, "fuzz: the example silo did not start: %s\n",
                   started.ToString().c_str());
      std::abort();
    }
    return host;
  }();
  return *host->silo();
}

}  // namespace granary::fuzz
