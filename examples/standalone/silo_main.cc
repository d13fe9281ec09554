// greeter-silo: a silo of your own, hosting the Greeter grain, with every
// flag of the packaged granary-silo (--gateway, --data_dir, --cluster, ...).
//
//   greeter-silo --gateway=127.0.0.1:30000 --data_dir=./greeter-data
//
// Prints "READY gateway=... silo=... http=..." once it listens; SIGTERM or
// SIGINT stops it gracefully.
#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "greeter_grain.h"
#include "silo/silo_flags.h"
#include "silo/silo_host.h"

int main(int argc, char** argv) {
  granary::silo::ParseSiloFlags(argc, argv);
  absl::StatusOr<granary::silo::SiloHostOptions> options =
      granary::silo::SiloHostOptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "greeter-silo: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  // Signals are taken by sigwait below, on this thread: blocked before any
  // other thread exists, so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  granary::silo::SiloHost host(*std::move(options));
  if (absl::Status s = host.AddGrain<granary::standalone::GreeterGrain>();
      !s.ok()) {
    std::fprintf(stderr, "greeter-silo: %s\n", s.ToString().c_str());
    return 1;
  }
  if (absl::Status s = host.Start(); !s.ok()) {
    std::fprintf(stderr, "greeter-silo: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("READY gateway=%s silo=%s http=%s\n",
              host.gateway_address().c_str(), host.silo_address().c_str(),
              host.http_address().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  host.Stop();
  return 0;
}
