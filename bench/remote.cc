#include "bench/remote.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/address.h"
#include "examples/bench_grain.h"
#include "examples/chat.granary.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "rpc/credentials.h"
#include "rpc/limits.h"

namespace granary::bench {
namespace {

constexpr absl::string_view kBenchGrainType = "granary.bench.BenchGrain";

// Asks `gateway` for its silo's status; fails fast when nothing listens.
absl::StatusOr<v1::SiloStatus> AskStatus(const std::string& gateway,
                                         absl::Duration timeout,
                                         const rpc::ClientSecurity& security) {
  std::unique_ptr<v1::Gateway::Stub> stub = v1::Gateway::NewStub(
      rpc::NewChannel(gateway, rpc::MakeChannelCredentials(security)));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  rpc::AddCallToken(&context, security);
  v1::SiloStatus status;
  grpc::Status s = stub->Status(&context, v1::StatusRequest(), &status);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "gateway ", gateway, " cannot be reached: ", s.error_message()));
  }
  return status;
}

absl::StatusOr<std::unique_ptr<Client>> ConnectClient(
    std::vector<std::string> gateways, int concurrency, absl::Duration timeout,
    const rpc::ClientSecurity& security, bool only_these = false,
    bool one_hop = true) {
  ClientOptions options;
  options.gateways = std::move(gateways);
  options.security = security;
  if (only_these) options.gateway_refresh_period = absl::ZeroDuration();
  if (!one_hop) options.location_cache_size = 0;
  // `ask` keeps `concurrency` awaited calls in flight and makes the next one
  // from the thread a reply resumes, where the client never waits for room.
  options.max_in_flight = std::max(options.max_in_flight, concurrency);
  options.connect_timeout = timeout;
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(std::move(options));
  if (client.ok()) {
    (*client)->Register(BenchGrainRef::Interface());
    (*client)->Register(StateGrainRef::Interface());
    (*client)->Register(SiloStatsRef::Interface());
    (*client)->Register(WorkGrainRef::Interface());
    (*client)->Register(TinyGrainRef::Interface());
    (*client)->Register(StatelessWorkGrainRef::Interface());
    (*client)->Register(examples::ChatRef::Interface());
  }
  return client;
}

}  // namespace

int64_t RemoteTarget::SiloResidentBytes() {
  int64_t total = 0;
  for (const std::string& gateway : gateways_) {
    absl::StatusOr<v1::SiloStatus> status =
        AskStatus(gateway, absl::Seconds(5), security_);
    if (!status.ok()) return 0;
    total += status->resident_bytes();
  }
  return total;
}

absl::StatusOr<std::vector<std::string>> ParseTargets(absl::string_view flag) {
  std::vector<std::string> gateways =
      absl::StrSplit(flag, ',', absl::SkipEmpty());
  if (gateways.empty()) {
    return absl::InvalidArgumentError("--target names no gateway");
  }
  absl::flat_hash_set<std::string> seen;
  for (const std::string& gateway : gateways) {
    std::string host;
    int port = 0;
    if (!SplitHostPort(gateway, &host, &port) || port == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--target: '", gateway,
                       "' is not HOST:PORT with a port in 1..65535"));
    }
    if (!seen.insert(gateway).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--target names ", gateway, " twice"));
    }
  }
  return gateways;
}

absl::StatusOr<std::unique_ptr<RemoteTarget>> RemoteTarget::Connect(
    const std::vector<std::string>& gateways, int concurrency, bool one_hop,
    absl::Duration timeout, const rpc::ClientSecurity& security) {
  std::unique_ptr<RemoteTarget> target(new RemoteTarget());
  target->security_ = security;
  for (const std::string& gateway : gateways) {
    GRANARY_ASSIGN_OR_RETURN(v1::SiloStatus status,
                             AskStatus(gateway, timeout, security));
    const bool hosts_bench =
        std::any_of(status.grain_types().begin(), status.grain_types().end(),
                    [](const v1::GrainTypeDescription& t) {
                      return t.name() == kBenchGrainType;
                    });
    if (!hosts_bench) {
      return absl::FailedPreconditionError(absl::StrCat(
          "silo ", status.name(), " behind gateway ", gateway,
          " does not host ", kBenchGrainType, " (granary-silo does)"));
    }
    if (status.max_in_flight() < concurrency) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--concurrency=", concurrency, " is more than gateway ", gateway,
          " accepts in flight per connection (", status.max_in_flight(),
          "); start granary-silo with --max_in_flight=", concurrency,
          " or more"));
    }
    target->silos_.push_back(std::move(status));
    target->gateways_.push_back(gateway);
  }
  GRANARY_ASSIGN_OR_RETURN(
      target->client_, ConnectClient(gateways, concurrency, timeout, security,
                                     /*only_these=*/false, one_hop));
  // Each silo's counts come from its own SiloStats grain, reached through
  // its own gateway only.
  std::vector<CallInvoker*> silos;
  for (const std::string& gateway : gateways) {
    GRANARY_ASSIGN_OR_RETURN(
        std::unique_ptr<Client> one,
        ConnectClient({gateway}, concurrency, timeout, security, true));
    silos.push_back(one.get());
    target->per_silo_.push_back(std::move(one));
  }
  target->lifecycle_ = std::make_unique<RemoteLifecycle>(silos, gateways);
  target->state_lifecycle_ = std::make_unique<RemoteLifecycle>(
      silos, gateways, absl::Milliseconds(1), RemoteLifecycle::Grains::kState);
  return target;
}

RemoteTarget::~RemoteTarget() { Close(); }

void RemoteTarget::Close() {
  for (auto& client : per_silo_) client->Close();
  if (client_ != nullptr) client_->Close();
}

}  // namespace granary::bench
