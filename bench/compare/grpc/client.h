// File: bench/compare/grpc/client.h
// -----------------------------------------------------------------------------
// The measuring side of granary-compare-grpc: starts the CompareEcho server
// in a helper process (bench/compare/grpc/server.h, through
// bench/child_process.h), connects one channel to it, and runs the arm's
// scenarios over that channel, each round checked against what the server
// echoed or counted.
//
//   absl::StatusOr<std::unique_ptr<GrpcScenarios>> arm =
//       GrpcScenarios::Start(/*scale=*/1.0);
//   ScenarioResult r;
//   r.scenario = "ask";
//   (*arm)->Run("ask", r);
//   absl::Status stopped = (*arm)->Stop();
//
// Scenarios, named after the granary-bench rows they bound:
//   ask             sequential unary echo calls, one sample per call
//   raw_grpc        one bidi stream: write one message, read its echo, repeat
//   oneway          one client stream, one Tell per Write, then the server's
//                   tally
//   oneway_batched  one client stream, 100 Tells per Write (a repeated
//                   field), then the tally
//
// The client uses gRPC's synchronous API on the calling thread (no hand-off
// to another thread, the lowest-latency way to run one call after another);
// the server uses the callback API, as Granary's gateway does.
//
// Threading: one thread uses a GrpcScenarios at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/child_process.h"
#include "bench/compare/grpc/compare_echo.grpc.pb.h"
#include "bench/report.h"

namespace granary::bench::compare {

class GrpcScenarios {
 public:
  // Starts the server process and connects to it, each within `timeout`.
  static absl::StatusOr<std::unique_ptr<GrpcScenarios>> Start(
      double scale, absl::Duration timeout = absl::Seconds(30));

  ~GrpcScenarios();  // Stop()
  GrpcScenarios(const GrpcScenarios&) = delete;
  GrpcScenarios& operator=(const GrpcScenarios&) = delete;

  static const std::vector<std::string>& Names();
  static std::string Unit(const std::string& scenario);

  // The server's HOST:PORT.
  const std::string& address() const { return address_; }

  // Runs one round of `scenario` (one of Names()) into `r`.
  void Run(const std::string& scenario, ScenarioResult& r);

  // Closes the channel and stops the server; OK when it exited cleanly.
  // Idempotent.
  absl::Status Stop();

 private:
  GrpcScenarios(double scale, std::unique_ptr<ChildProcess> server,
                std::string address, std::shared_ptr<grpc::Channel> channel);

  void Unary(ScenarioResult& r);
  void BidiPingPong(ScenarioResult& r);
  void StreamOnePerWrite(ScenarioResult& r);
  void StreamBatched(ScenarioResult& r);

  const double scale_;
  std::unique_ptr<ChildProcess> server_;
  const std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<CompareEcho::Stub> stub_;
};

}  // namespace granary::bench::compare
