// granary-silo: a silo hosting, with --examples, the example grains (Counter,
// Ping, BankAccount with its state and Alarm with its reminders), with
// --bench_grains the grains granary-bench drives, and with --grain_library
// the grain types of shared libraries built with granary-dev (docs/sdk.md). It
// is also the example of a silo for your own grains: flags -> SiloHostOptions
// -> SiloHost (silo/silo_host.h).
//
//   granary-silo --examples --gateway=127.0.0.1:30000 --http=127.0.0.1:8080
//   granary-silo --config=silo.flags     # the same flags, one per line
//
// When every listener is bound it prints exactly one line to stdout:
//   READY gateway=HOST:PORT silo=HOST:PORT http=HOST:PORT
// SIGTERM or SIGINT shuts down gracefully (grains deactivate, calls still
// queued are answered UNAVAILABLE or passed on) and exits 0; a second signal
// exits at once. Bad flags exit 2 with a message naming the flag.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "core/log.h"
#include "core/thread_top.h"
#include "examples/bench_grain.h"
#include "examples/counter_grain.h"
#include "silo/silo_flags.h"
#include "silo/silo_host.h"

ABSL_FLAG(bool, examples, false,
          "Host the example grains (granary.examples.*: Counter, Ping, "
          "BankAccount, Alarm, ...). They are demonstrations: anyone who may "
          "call the gateway may call them, so a production silo leaves them "
          "out.");
ABSL_FLAG(bool, bench_grains, false,
          "Host the grains granary-bench drives (granary.bench.*).");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "granary-silo: %s\n", message.c_str());
  return 2;
}

int Main() {
  absl::StatusOr<granary::silo::SiloHostOptions> options =
      granary::silo::SiloHostOptionsFromFlags();
  if (!options.ok()) return Fail(std::string(options.status().message()));
  if (granary::silo::CheckConfigRequested()) {
    std::fputs(granary::silo::EffectiveConfig().c_str(), stdout);
    std::fputs("granary-silo: the configuration is valid\n", stderr);
    return 0;
  }
  // Signals are taken by sigwait below, never by a handler on some thread.
  // Blocked before any thread exists, so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const bool libraries = !options->grain_library.empty();
  granary::silo::SiloHost host(*std::move(options));
  const bool examples = absl::GetFlag(FLAGS_examples);
  const bool bench_grains = absl::GetFlag(FLAGS_bench_grains);
  if (examples) host.AddGrains(granary::examples::AddExampleGrains);
  granary::bench::BenchStats bench_stats, state_stats;
  if (bench_grains) {
    host.AddGrains([&](granary::silo::Runtime& silo) {
      return granary::bench::AddBenchGrains(silo, &bench_stats, &state_stats);
    });
  }
  if (!examples && !bench_grains && !libraries) {
    GRANARY_LOG(kWarning)
        << "this silo hosts no grain types (--examples hosts the example "
           "grains, --grain_library those of a library): it forwards calls to "
           "silos of its cluster that host "
           "them, and answers the rest UNIMPLEMENTED";
  }
  if (absl::Status s = host.Start(); !s.ok()) {
    return Fail(s.code() == absl::StatusCode::kInvalidArgument
                    ? std::string(s.message())
                    : s.ToString());
  }
  std::printf("READY gateway=%s silo=%s http=%s\n",
              host.gateway_address().c_str(), host.silo_address().c_str(),
              host.http_address().c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  GRANARY_LOG(kInfo) << "silo=" << host.id() << " signal=" << sig
                     << " shutting down";
  // A second signal ends the process at once.
  std::thread([signals]() mutable {
    granary::RunThreadTop("second_signal", [&signals] {
      int again = 0;
      sigwait(&signals, &again);
      std::_Exit(1);
    });
  }).detach();
  host.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A Granary silo. Example: granary-silo --examples "
      "--gateway=127.0.0.1:30000 (the example grains)");
  granary::silo::ParseSiloFlags(argc, argv);
  return Main();
}
