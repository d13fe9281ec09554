// granary-compare-caf: the C++ Actor Framework (CAF 0.17) comparison arm.
//
//   granary-compare-caf                          # every scenario, 5 rounds
//   granary-compare-caf --rounds=3 --scenarios=ask,chain
//   granary-compare-caf --workers=2 --json=caf.json
//
// The in-process reference for `granary-bench --hosted`: the same scenario
// names, operation counts (at the same --scale), warm-up and interleaved
// rounds, RESULT / SUMMARY lines (mode=caf) and JSON report, so a report can
// pair each row with Granary's. Every round is verified against what the
// actors report; exits 1 when a round was not, 2 on bad flags.
//
// How each scenario's operation differs from Granary's (the report's
// footnotes):
//
// Every scenario
//   - CAF actors are addressed by handle (caf::actor), not by grain id: no
//     id hashing, no activation-table (catalog) lookup and no directory
//     entry on any message. Handles to the long-lived actors are held across
//     rounds, as Granary's grains stay active across rounds.
//   - Messages are CAF's type-erased tuples of atoms and integers, not
//     protobuf objects inside a call object; nothing is serialized in either.
//   - Requests carry no deadline (caf::infinite); every Granary request has
//     one (30 s) armed on a timer queue and raced against the reply.
//   - No turn scheduling: CAF runs an actor's mailbox with no per-turn budget
//     (scheduler.max-throughput is unbounded by default; Granary:
//     --turn_budget=64) and no reentrancy bookkeeping.
//   - Idle workers: with CAF's default work-stealing scheduler an idle
//     worker polls its queue 100 times, then 500 times with a 50 us sleep
//     in between (work arriving meanwhile waits for the sleep to end), and
//     only then waits on a condition variable that work from outside the
//     system signals. Granary's idle worker spins --idle_spin pause
//     instructions and then sleeps until it is woken. Sequential latency rows
//     therefore include part of CAF's 50 us poll interval; --policy=sharing
//     (one shared queue, condition-variable wake-ups) shows the other
//     trade-off.
//   - The outside caller is a caf::scoped_actor (a blocking actor with a
//     mailbox of its own) that blocks on a condition variable as soon as its
//     mailbox is empty, with no spinning; granary-bench's .Get() spins
//     briefly before it sleeps. With the idle-worker polling above, the
//     sequential rows (activation_one, ask, chain, fanout) are largely
//     thread wake-up time in CAF, not message handling.
//
// activation / activation_one
//   - Actors are spawned explicitly (system.spawn) rather than activated by a
//     first call to an id; the first ping confirms the start, as Granary's
//     first call does, but there is no placement, no directory registration
//     and no OnActivate/OnDeactivate turn (the start is counted in the
//     behavior's initialization instead).
//   - The first ping is an asynchronous send whose reply CAF returns to the
//     sender as a message, not a request() (which would be one pending
//     response handle per actor); its sample runs from spawn to pong.
//   - Stopping is an exit message (send_exit, user_shutdown) confirmed by a
//     down message from a monitor; Granary sends a Deactivate call, awaits
//     its reply, and waits for the silo's OnDeactivate count. No storage is
//     read or written in either (BenchGrain keeps no persistent state), but
//     CAF has no persistence hook at all.
//
// oneway / oneway_spread
//   - caf::anon_send from the driving thread: a mailbox enqueue with no
//     sender, where a Granary Tell is a one-way call routed by grain id.
//     Latency is sampled the same way (every 16th tell carries its send time;
//     the counter records delivery delay).
//
// ask
//   - scoped_actor request(...).receive(...): one blocking request/response
//     per sample, matched by response id, with no deadline.
//
// chain
//   - depth + 1 chain links spawned up front, each holding its successor's
//     handle (Granary's head calls the grain "chain/<depth>" by id). Each
//     link awaits its successor with request(...).then into a response
//     promise, the non-blocking equivalent of co_await.
//
// pingpong
//   - Balls are two-integer messages answered to current_sender(); Granary's
//     Ball carries the origin's and sender's keys (strings) and routes the
//     return ball by id. The volley is started by a request to player A that
//     A answers through a response promise once the last ball arrives.
//
// fanout
//   - The head holds its leaves' handles (Granary calls "fanout-leaf-<i>" by
//     id) and gathers replies with a shared counter and a response promise
//     rather than WhenAll over tasks.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "bench/compare/caf/scenarios.h"
#include "bench/compare/runner.h"
#include "caf/all.hpp"

ABSL_FLAG(std::string, scenarios, "",
          "Comma-separated scenarios to run (default: all of activation, "
          "activation_one, oneway, oneway_spread, ask, chain, pingpong, "
          "fanout).");
ABSL_FLAG(int32_t, rounds, 5, "Measured rounds per scenario (at least 1).");
ABSL_FLAG(int32_t, warmup, 1, "Unreported warm-up rounds per scenario.");
ABSL_FLAG(double, scale, 1.0,
          "Multiplies every scenario's operation count (e.g. 0.01 for a smoke "
          "run).");
ABSL_FLAG(int32_t, workers, 0, "CAF scheduler threads (0: hardware threads).");
ABSL_FLAG(std::string, policy, "stealing",
          "CAF scheduler policy: stealing (CAF's default: idle workers poll, "
          "then sleep between polls) or sharing (one shared queue; idle "
          "workers wait on a condition variable).");
ABSL_FLAG(int32_t, depth, 5, "Depth of the chain scenario.");
ABSL_FLAG(int32_t, fanout, 10,
          "Actors the fanout scenario's head requests at once (1..1000).");
ABSL_FLAG(std::string, json, "",
          "Also write every scenario summary to this file as JSON "
          "(bench/report.proto).");

namespace granary::bench::compare {
namespace {

int BadFlag(const std::string& message) {
  std::fprintf(stderr, "granary-compare-caf: %s\n", message.c_str());
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
      ParseScenarios(absl::GetFlag(FLAGS_scenarios), CafScenarios::Names());
  if (!scenarios.ok())
    return BadFlag(std::string(scenarios.status().message()));
  const int depth = absl::GetFlag(FLAGS_depth);
  const int fanout = absl::GetFlag(FLAGS_fanout);
  int workers = absl::GetFlag(FLAGS_workers);
  if (depth < 1) return BadFlag("--depth must be at least 1");
  if (fanout < 1 || fanout > 1000) {
    return BadFlag("--fanout must be in [1, 1000]");
  }
  if (workers < 0) return BadFlag("--workers must not be negative");
  const std::string policy = absl::GetFlag(FLAGS_policy);
  if (policy != "stealing" && policy != "sharing") {
    return BadFlag("--policy must be stealing or sharing");
  }
  if (workers == 0) {
    workers =
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

  caf::actor_system_config config;
  config.set("scheduler.max-threads", static_cast<size_t>(workers));
  config.set("scheduler.policy", caf::atom_from_string(policy));
  caf::actor_system system{config};
  int exit_status = 0;
  {
    CafScenarios arm(system,
                     {.scale = scale, .depth = depth, .fanout = fanout});
    RunPlan plan;
    plan.arm = "caf";
    plan.mode = "caf";
    plan.scenarios = *scenarios;
    plan.rounds = rounds;
    plan.warmup = warmup;
    plan.scale = scale;
    plan.json_path = absl::GetFlag(FLAGS_json);
    plan.env = {
        {"framework", "caf"},
        {"caf_version", absl::StrCat(CAF_MAJOR_VERSION, ".", CAF_MINOR_VERSION,
                                     ".", CAF_PATCH_VERSION)},
        {"workers", absl::StrCat(system.scheduler().num_workers())},
        {"policy", policy},
        {"depth", absl::StrCat(depth)},
        {"fanout", absl::StrCat(fanout)},
    };
    exit_status = RunRounds(
        plan,
        [&arm](const std::string& s, ScenarioResult& r) { arm.Run(s, r); },
        CafScenarios::Unit);
  }  // stops the long-lived actors; the system then waits for them
  return exit_status;
}

}  // namespace
}  // namespace granary::bench::compare

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "C++ Actor Framework comparison arm of granary-bench. Example: "
      "granary-compare-caf --rounds=3 --scenarios=ask,chain");
  absl::ParseCommandLine(argc, argv);
  return granary::bench::compare::Main();
}
