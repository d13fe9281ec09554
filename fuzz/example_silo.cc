#include <cstdio>
#include <cstdlib>

#include "examples/counter_grain.h"
#include "fuzz/fuzz_support.h"
#include "silo/runtime/silo.h"

namespace granary::fuzz {

silo::Silo& ExampleSilo() {
  static silo::Silo* const silo = [] {
    silo::SiloOptions options;
    options.name = "fuzz-silo";
    options.workers = 2;
    options.idle_spin = 0;  // the fuzzer's own thread needs the cores
    options.default_idle_timeout = absl::Seconds(5);
    options.collection_period = absl::Seconds(1);
    options.min_reminder_period = absl::Hours(1);
    options.max_activations = 20000;
    auto* s = new silo::Silo(options);
    absl::Status added = examples::AddExampleGrains(*s);
    absl::Status started = added.ok() ? s->Start() : added;
    if (!started.ok()) {
      std::fprintf(stderr, "fuzz: the example silo did not start: %s\n",
                   started.ToString().c_str());
      std::abort();
    }
    return s;
  }();
  return *silo;
}

}  // namespace granary::fuzz
