// File: bench/remote.h
// -----------------------------------------------------------------------------
// The remote mode of granary-bench (--target): running silos reached through
// their gateways with the client SDK, as an application would reach them.
//
//   absl::StatusOr<std::vector<std::string>> gateways =
//       ParseTargets("127.0.0.1:30000");
//   absl::StatusOr<std::unique_ptr<RemoteTarget>> target =
//       RemoteTarget::Connect(*gateways, /*concurrency=*/16);
//   ctx.invoker = (*target)->invoker();
//   ctx.lifecycle = (*target)->lifecycle();
//   ...
//   (*target)->Close();
//
// Connect first asks every gateway for its status (granary.v1.Gateway/Status),
// so a gateway that cannot be reached, a silo without BenchGrain, or a
// concurrency past the gateway's in-flight limit is a clear error before
// anything is measured.
//
// Threading: Connect and Close on one thread; invoker() and lifecycle() are
// thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/lifecycle.h"
#include "client/client.h"
#include "granary/v1/gateway.pb.h"

namespace granary::bench {

// Splits --target: comma-separated HOST:PORT with a port in 1..65535, no
// duplicates. INVALID_ARGUMENT otherwise.
absl::StatusOr<std::vector<std::string>> ParseTargets(absl::string_view flag);

class RemoteTarget {
 public:
  // UNAVAILABLE when a gateway cannot be reached within `timeout`;
  // FAILED_PRECONDITION when its silo does not host granary.bench.BenchGrain
  // or accepts fewer than `concurrency` calls in flight per connection.
  // `one_hop`: the client sends a grain's calls to the gateway of its silo
  // once it learned where that is (ClientOptions::location_cache_size);
  // false: to a gateway chosen by the grain's hash, which passes the call on
  // when the grain lives elsewhere.
  // `security`: TLS and the token the gateways want (default plaintext).
  static absl::StatusOr<std::unique_ptr<RemoteTarget>> Connect(
      const std::vector<std::string>& gateways, int concurrency,
      bool one_hop = true, absl::Duration timeout = absl::Seconds(5),
      const rpc::ClientSecurity& security = {});

  ~RemoteTarget();  // Close()

  // The client over all gateways: what the scenarios call through.
  CallInvoker* invoker() { return client_.get(); }
  LifecycleCounter* lifecycle() { return lifecycle_.get(); }
  // The same for the StateGrains of the storage scenarios.
  LifecycleCounter* state_lifecycle() { return state_lifecycle_.get(); }
  // What each gateway said about its silo, in --target order.
  const std::vector<v1::SiloStatus>& silos() const { return silos_; }
  // A client of the first gateway only (no other gateway is ever used).
  CallInvoker* first_gateway() { return per_silo_.front().get(); }

  // Resident memory of the silos now, summed (Gateway.Status); 0 when a
  // gateway does not answer.
  int64_t SiloResidentBytes();

  // Closes the clients. Idempotent.
  void Close();

 private:
  RemoteTarget() = default;

  std::vector<std::string> gateways_;
  rpc::ClientSecurity security_;
  std::vector<v1::SiloStatus> silos_;
  std::unique_ptr<Client> client_;
  // With several gateways, one client per gateway, so lifecycle counts are
  // read from every silo (today a gateway's calls run in its own silo).
  std::vector<std::unique_ptr<Client>> per_silo_;
  std::unique_ptr<RemoteLifecycle> lifecycle_;
  std::unique_ptr<RemoteLifecycle> state_lifecycle_;
};

}  // namespace granary::bench
