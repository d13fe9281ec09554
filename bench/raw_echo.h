// File: bench/raw_echo.h
// -----------------------------------------------------------------------------
// The raw gRPC comparison arm of granary-bench (scenario `raw_grpc`): a plain
// bidirectional-stream ping-pong between this process and a helper process on
// the same machine, the same shape as the remote `ask` scenario (client
// process -> gateway process -> reply) minus everything Granary adds. The
// helper is granary-bench itself, re-executed with --serve_raw_echo.
//
//   // Child: granary-bench --serve_raw_echo=127.0.0.1:0
//   return ServeRawEcho("127.0.0.1:0");   // READY address=127.0.0.1:PORT
//
//   // Parent:
//   absl::StatusOr<std::unique_ptr<RawEchoArm>> arm = RawEchoArm::Start();
//   ScenarioResult r;
//   (*arm)->PingPong(/*ops=*/5000, &r);
//
// API choice, for fairness: the server is gRPC's callback API, as the
// gateway's is (silo/gateway/gateway_service.cc); the client is the synchronous
// API (Write then Read on the calling thread), which is what a plain gRPC
// program would write for a sequential ping-pong and the lowest-latency way to
// run one: no thread hand-off on the client side. The figure is therefore a
// floor for one round trip through gRPC on this machine, not a mirror of the
// client SDK's threading.
//
// Threading: RawEchoArm is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/child_process.h"
#include "bench/raw_echo.grpc.pb.h"
#include "bench/scenarios.h"

namespace granary::bench {

// The child's main: serves RawEcho on `address` (HOST:PORT, port 0 picks
// one), prints `READY address=HOST:PORT` on stdout once listening, and serves
// until stdin reaches end-of-file or SIGTERM/SIGINT arrives. Returns the
// process exit status (0, or 2 when it cannot listen).
int ServeRawEcho(const std::string& address);

// The parent side: the helper process and a connected channel to it.
class RawEchoArm {
 public:
  // Starts the helper and connects to it (each bounded by `timeout`).
  static absl::StatusOr<std::unique_ptr<RawEchoArm>> Start(
      absl::Duration timeout = absl::Seconds(30));

  ~RawEchoArm();  // stops and reaps the helper

  const std::string& address() const { return address_; }
  // The helper's process (the server side of --profile).
  pid_t pid() const;

  // Runs `ops` sequential round trips on one new stream; fills `r` (ops,
  // seconds, latencies_ns, errors, verified: every echo carried its seq).
  void PingPong(int64_t ops, ScenarioResult* r);

  // Stops the helper; OK when it exited cleanly.
  absl::Status Stop();

 private:
  RawEchoArm(std::unique_ptr<ChildProcess> child, std::string address,
             std::shared_ptr<grpc::Channel> channel);

  std::unique_ptr<ChildProcess> child_;
  const std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<RawEcho::Stub> stub_;
};

}  // namespace granary::bench
