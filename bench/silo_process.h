// File: bench/silo_process.h
// -----------------------------------------------------------------------------
// One granary-silo process the load generator starts and owns (the failover
// and overload scenarios). It listens on 127.0.0.1 with free ports and hosts
// the bench grains; its stdout gives the READY line, its stderr goes to a
// log file, whose last lines are quoted when it does not start.
//
//   absl::StatusOr<std::unique_ptr<SiloProcess>> silo = SiloProcess::Start(
//       "build/bin/granary-silo", "/tmp/data", "/tmp/silo.log", {});
//   (*silo)->gateway();  // 127.0.0.1:<port>
//   (*silo)->Stop();     // SIGTERM; SIGKILL after 30 s
//
// Threading: one thread uses a SiloProcess at a time.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary::bench {

class SiloProcess {
 public:
  // Starts `binary` with its data in `data_dir`, logging errors to `log`,
  // with `extra_flags` (--cluster=..., --log_level=...) after the defaults,
  // and waits up to 60 s for its READY line.
  static absl::StatusOr<std::unique_ptr<SiloProcess>> Start(
      const std::string& binary, const std::string& data_dir,
      const std::string& log, const std::vector<std::string>& extra_flags);

  ~SiloProcess();  // SIGKILL if still running
  SiloProcess(const SiloProcess&) = delete;
  SiloProcess& operator=(const SiloProcess&) = delete;

  void Signal(int sig);
  // Waits for it to exit; its wait status.
  int Wait();
  // Stops it gracefully (SIGTERM), killing it after 30 s.
  void Stop();

  pid_t pid() const { return pid_; }
  const std::string& gateway() const { return gateway_; }
  const std::string& address() const { return address_; }  // silo endpoint
  const std::string& http() const { return http_; }

 private:
  SiloProcess() = default;
  pid_t pid_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string gateway_;
  std::string address_;
  std::string http_;
};

// Waits until the silo whose gateway is `gateway` sees `n` Active silos;
// DEADLINE_EXCEEDED ("the cluster did not form") after 30 s.
absl::Status WaitForActiveSilos(const std::string& gateway, int n);

}  // namespace granary::bench
