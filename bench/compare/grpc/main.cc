// granary-compare-grpc: the plain gRPC comparison arm, the transport ceiling
// for `granary-bench --target` (Granary's remote mode).
//
//   granary-compare-grpc                         # every scenario, 5 rounds
//   granary-compare-grpc --rounds=3 --scenarios=ask,raw_grpc
//   granary-compare-grpc --json=grpc.json
//
// A CompareEcho server (bench/compare/grpc/compare_echo.proto) runs in a
// helper process, this binary started again with a hidden flag; the
// scenarios run in this process against it over 127.0.0.1, with the same
// warm-up, interleaved rounds, RESULT / SUMMARY lines (mode=grpc) and JSON
// report as granary-bench, and scenario names that pair with its rows.
// Every round is verified against what the server echoed or counted; exits
// 1 when a round was not, 2 on bad flags or a server that cannot be started.
//
// How each scenario's operation differs from Granary's remote one (the
// report's footnotes):
//
// Every scenario
//   - No grain routing: the server answers in the gRPC handler. No grain id,
//     no gateway routing by method path, no activation lookup or directory,
//     no turn on a silo worker, no reply hand-off from a worker back to the
//     stream, no per-request deadline timer.
//   - Both processes run on this machine over loopback. ΔRSS is the
//     measuring (client) process's, as in granary-bench's remote rows; the
//     server process's memory is not measured.
//   - The client is gRPC's synchronous API on the measuring thread.
//     Granary's client SDK uses the callback API: calls are queued and
//     written in batches on one Connect stream, replies complete on gRPC's
//     callback threads, and the caller waits in .Get(). The server here is
//     the callback API, as Granary's gateway is.
//
// ask (unary)
//   - One unary RPC per call: a new HTTP/2 stream with headers and trailers
//     each time, where Granary multiplexes every call onto one long-lived
//     Connect stream in batches. So this row is not a strict floor for
//     Granary's ask (raw_grpc is); it is what a plain gRPC service would do.
//   - The message is an Echo (seq + a serialized Ping) rather than Granary's
//     envelope (grain type, key, method path, call id) around a PingRequest.
//
// raw_grpc (bidi ping-pong)
//   - The same shape as granary-bench's raw_grpc arm (one stream, write one
//     message, read its echo, repeat) on this arm's own service and server
//     process; one message per write, no batching, no routing.
//
// oneway (one Tell per Write)
//   - A client-streaming RPC, each Write one Tell; the sync Write returns
//     once gRPC has taken the message (flow control may block it). Granary's
//     client batches one-way calls onto the Connect stream as they queue up,
//     and each Tell is then a turn of the target grain. The count comes back
//     as the RPC's reply when the client half-closes, not from a separate
//     Count call. Delivery latency is sampled as Granary's (every 16th Tell
//     carries its send time; clocks are the same machine's).
//
// oneway_batched (100 Tells per Write)
//   - As oneway, but each Write carries a fixed batch of 100 Tells in a
//     repeated field: the ceiling for a transport that batches, where
//     Granary's batches are whatever queued while the last write was in
//     flight. Ops are Tells (10,000 at --scale=1, in 100 writes); it has no
//     granary-bench row of the same name and pairs with `oneway`.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/compare/grpc/client.h"
#include "bench/compare/grpc/server.h"
#include "bench/compare/runner.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, scenarios, "",
          "Comma-separated scenarios to run (default: all of ask, raw_grpc, "
          "oneway, oneway_batched).");
ABSL_FLAG(int32_t, rounds, 5, "Measured rounds per scenario (at least 1).");
ABSL_FLAG(int32_t, warmup, 1, "Unreported warm-up rounds per scenario.");
ABSL_FLAG(double, scale, 1.0,
          "Multiplies every scenario's operation count (e.g. 0.01 for a smoke "
          "run).");
ABSL_FLAG(std::string, json, "",
          "Also write every scenario summary to this file as JSON "
          "(bench/report.proto).");

namespace granary::bench::compare {
namespace {

int BadFlag(const std::string& message) {
  std::fprintf(stderr, "granary-compare-grpc: %s\n", message.c_str());
  return 2;
}

int Main() {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const double scale = absl::GetFlag(FLAGS_scale);
  if (absl::Status s = CheckRoundFlags(rounds, warmup, scale); !s.ok()) {
    return BadFlag(std::string(s.message()));
  }
  absl::StatusOr<std::vector<std::string>> scenarios =
      ParseScenarios(absl::GetFlag(FLAGS_scenarios), GrpcScenarios::Names());
  if (!scenarios.ok())
    return BadFlag(std::string(scenarios.status().message()));

  absl::StatusOr<std::unique_ptr<GrpcScenarios>> arm =
      GrpcScenarios::Start(scale);
  if (!arm.ok()) return BadFlag(arm.status().ToString());

  RunPlan plan;
  plan.arm = "grpc";
  plan.mode = "grpc";
  plan.scenarios = *scenarios;
  plan.rounds = rounds;
  plan.warmup = warmup;
  plan.scale = scale;
  plan.json_path = absl::GetFlag(FLAGS_json);
  plan.env = {
      {"framework", "grpc"},
      {"grpc_version", grpc::Version()},
      {"server", (*arm)->address()},
  };
  const int exit_status = RunRounds(
      plan,
      [&arm](const std::string& s, ScenarioResult& r) { (*arm)->Run(s, r); },
      GrpcScenarios::Unit);
  if (absl::Status s = (*arm)->Stop(); !s.ok()) {
    std::fprintf(stderr, "granary-compare-grpc: server: %s\n",
                 s.ToString().c_str());
  }
  return exit_status;
}

}  // namespace
}  // namespace granary::bench::compare

int main(int argc, char** argv) {
  // The server's helper process (bench/compare/grpc/server.h): not a flag a
  // user passes.
  const absl::string_view serve = granary::bench::compare::kServeFlag;
  if (argc == 2 && absl::StartsWith(argv[1], serve)) {
    return granary::bench::compare::ServeCompareEcho(argv[1] + serve.size());
  }
  absl::SetProgramUsageMessage(
      "Plain gRPC comparison arm of granary-bench. Example: "
      "granary-compare-grpc --rounds=3 --scenarios=ask,raw_grpc");
  absl::ParseCommandLine(argc, argv);
  return granary::bench::compare::Main();
}
