// SiloHost's listeners (silo/silo_host.h): the silo endpoint other silos
// reach (gRPC over TCP, or an in-process network), the client gateway and
// the HTTP endpoint, as parts of the host's lifecycle (silo/lifecycle.h).
#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/address.h"
#include "core/clock.h"
#include "core/log.h"
#include "grpcpp/grpcpp.h"
#include "rpc/callback_queue.h"
#include "rpc/credentials.h"
#include "rpc/listener_guard.h"
#include "rpc/security.h"
#include "silo/readiness.h"
#include "silo/silo_host_parts.h"

namespace granary::silo {
namespace {

// granary_auth_refused_total{port,reason}: requests refused for their
// credentials that reached Granary's code (TLS handshakes gRPC refuses
// never do; gRPC logs them).
void AddAuthMetrics(metrics::Registry* registry,
                    const rpc::AuthCounters* gateway,
                    const std::atomic<int64_t>* http) {
  registry->AddCallback(
      "granary_auth_refused_total",
      "Requests refused for a missing or wrong bearer token, by port and "
      "reason.",
      metrics::Type::kCounter, {"port", "reason"}, [gateway, http] {
        return metrics::Samples{
            {{"gateway", "missing_token"},
             static_cast<double>(gateway->missing_token.load())},
            {{"gateway", "wrong_token"},
             static_cast<double>(gateway->wrong_token.load())},
            {{"http", "missing_or_wrong_token"},
             static_cast<double>(http->load())}};
      });
  registry->AddCallback(
      "granary_tls_handshake_failures_total",
      "TLS handshakes refused in this process, as server or client (no or "
      "an untrusted or expired certificate, plaintext against TLS): gRPC "
      "refuses them before any call, and logs each.",
      metrics::Type::kCounter, {}, [] {
        return metrics::Samples{
            {{}, static_cast<double>(rpc::TlsHandshakeFailures())}};
      });
}

void WarnOfPlaintext(const SiloHostOptions& o) {
  std::string host;
  int port = 0;
  if (SplitHostPort(o.gateway, &host, &port) && !IsLoopbackHost(host) &&
      o.tls_cert.empty()) {
    GRANARY_LOG(kWarning) << "gateway=" << o.gateway
                          << " serves plaintext off loopback "
                             "(--allow_plaintext): anyone on the network can "
                             "read and make its calls";
  }
  if (SplitHostPort(o.silo, &host, &port) && !IsLoopbackHost(host) &&
      o.cluster_ca.empty()) {
    GRANARY_LOG(kWarning) << "silo_endpoint=" << o.silo
                          << " serves plaintext off loopback "
                             "(--allow_plaintext): anything that reaches it "
                             "can act as a silo of the cluster";
  }
}

}  // namespace

// The listeners' parts, subscribed in stage order.
void SiloHost::SubscribeListeners() {
  Parts& p = *parts_;
  p.lifecycle.Subscribe(
      Stage::kSiloEndpoint, "silo endpoint",
      [this] { return StartSiloEndpoint(); },
      [&p] {
        for (int port : p.guarded_ports) rpc::UnguardListener(port);
      });
  // Calls from other silos: the cluster's stop (silo_host_cluster.cc) lets
  // those passed on finish first.
  p.lifecycle.Subscribe(Stage::kPeerCalls, "silo endpoint", nullptr,
                        [this] { StopPeerCalls(); });
  if (!options_.gateway.empty()) {
    p.lifecycle.Subscribe(Stage::kListeners, "gateway",
                          [this] { return StartGateway(); });
    p.lifecycle.Subscribe(Stage::kClientCalls, "gateway", nullptr, [&p] {
      // Clients send what this gateway did not take elsewhere.
      if (p.gateway == nullptr) return;
      if (p.halting) return p.gateway->Stop(absl::ZeroDuration());
      p.gateway->Stop(
          p.router != nullptr
              ? p.Left(absl::Seconds(10), absl::Seconds(1))
              : p.Left(absl::Milliseconds(500), absl::Milliseconds(200)));
    });
  }
  if (!options_.http.empty()) {
    p.lifecycle.Subscribe(Stage::kListeners, "http",
                          [this] { return StartHttp(); });
    // The probes answer (503: leaving) until everything else has stopped.
    p.lifecycle.Subscribe(Stage::kSiloEndpoint, "http", nullptr, [&p] {
      if (p.http != nullptr) p.http->Stop();
      if (p.admin != nullptr) p.admin->Stop();
    });
  }
  // The gRPC listeners are probed over their real ports once all listen.
  p.lifecycle.Subscribe(Stage::kActive, "listener watch", [&p] {
    if (p.listener_watch != nullptr && !p.guarded_ports.empty()) {
      p.listener_watch->Start();
    }
    return absl::OkStatus();
  });
}

// (kStores) The open-file limit, raised to its hard limit, sizes the caps
// on connections to the gRPC listeners (rpc/listener_guard.h).
void SiloHost::GuardListeners() {
  Parts& p = *parts_;
  const int64_t open_files = rpc::RaiseOpenFileLimit();
  p.listener_caps = rpc::DefaultListenerCaps(open_files, /*listeners=*/2);
  if (options_.max_connections > 0) {
    p.listener_caps.max_connections = options_.max_connections;
  }
  if (options_.max_connections_per_peer > 0) {
    p.listener_caps.max_per_peer = options_.max_connections_per_peer;
  }
  p.listener_caps.max_per_peer =
      std::min(p.listener_caps.max_per_peer, p.listener_caps.max_connections);
  if (!rpc::ListenerGuardActive()) {
    GRANARY_LOG(kWarning)
        << "this binary does not export the listener guard's accept4 and "
           "accept (link "
           "with granary::rpc's link options): a connection flood can stop "
           "a gRPC listener, and the connection caps (--max_connections, "
           "--http_connections_per_peer) are not enforced";
  }
  GRANARY_LOG(kInfo) << "open-file limit " << open_files
                     << "; connections per gRPC listener at most "
                     << p.listener_caps.max_connections << ", per peer "
                     << p.listener_caps.max_per_peer;
  p.listener_watch =
      std::make_unique<ListenerWatch>(options_.listener_probe_period);
}

// kSiloEndpoint: the silo-to-silo endpoint: liveness probes, the gateway
// protocol for calls from other silos, this silo's part of the directory in
// a cluster, what the cluster provider serves, and the standard health
// service.
absl::Status SiloHost::StartSiloEndpoint() {
  Parts& p = *parts_;
  if (p.env.in_process.has_value()) return JoinInProcessNetwork();
  rpc::HoldGrpcCallbackQueue();
  grpc::EnableDefaultHealthCheckService(true);
  GatewayServiceOptions peer_options;
  peer_options.max_in_flight = 1 << 16;
  peer_options.max_message_bytes = options_.max_message_bytes;
  peer_options.max_batch_bytes =
      std::min(1 << 20, options_.max_message_bytes / 2);
  peer_options.from_silos = true;
  // A link from another silo may hold as much as a client connection.
  peer_options.max_connection_bytes = options_.connection_memory_budget;
  p.peer_gateway = std::make_unique<GatewayService>(nullptr, peer_options);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // see gateway
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      rpc::MakeServerCredentials(ClusterServerSecurity(options_), nullptr);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(options_.silo, *credentials, &port);
  builder.RegisterService(&p.control);
  // Calls from other silos: a silo alone has none to take.
  if (p.cluster->clustered()) {
    builder.RegisterService(p.peer_gateway->grpc_service());
  }
  rpc::ApplyServerLimits(ServerLimitsOf(options_), &builder);
  if (p.cluster->clustered()) {
    // Types this silo or a live member of its view hosts.
    p.directory_service = std::make_unique<directory::DirectoryService>(
        &p.partition, [&p](absl::string_view type) -> absl::Status {
          Runtime* silo = p.silo_ptr.load();
          if (silo == nullptr) {
            return absl::UnavailableError("this silo is starting");
          }
          if (silo->HostsType(type) || p.hosted_types.Contains(type)) {
            return absl::OkStatus();
          }
          return absl::PermissionDeniedError(
              absl::StrCat("no silo of this cluster hosts grain type '",
                           absl::CHexEscape(type.substr(0, 256)), "'"));
        });
    builder.RegisterService(p.directory_service.get());
  }
  p.cluster->AddServices(&builder, p.stores.grain_state.get());
  p.silo_server = builder.BuildAndStart();
  if (p.silo_server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --silo=", options_.silo));
  }
  rpc::GuardListener(port, p.listener_caps);
  p.guarded_ports.push_back(port);
  p.listener_watch->Add("silo", options_.silo, port);
  std::string host;
  int unused = 0;
  SplitHostPort(options_.silo, &host, &unused);
  p.silo_address = options_.silo_advertise.empty()
                       ? absl::StrCat(host, ":", port)
                       : options_.silo_advertise;
  // A restarted silo is a new silo: its identity carries its start time.
  p.generation = absl::ToUnixMillis(absl::Now());
  p.id = absl::StrCat(p.silo_address, "@", p.generation);
  p.control.set_id(p.id);
  return absl::OkStatus();
}

// kSiloEndpoint in process: the id the environment gives; nothing listens.
absl::Status SiloHost::JoinInProcessNetwork() {
  Parts& p = *parts_;
  const std::string& id = p.env.in_process->id;
  const size_t at = id.rfind('@');
  p.silo_address = id.substr(0, at);
  p.generation = 0;
  std::string host;
  int port = 0;
  if (!SplitHostPort(p.silo_address, &host, &port) || port == 0 ||
      (at != std::string::npos &&
       !absl::SimpleAtoi(id.substr(at + 1), &p.generation))) {
    return absl::InvalidArgumentError(
        absl::StrCat("an in-process silo's id must be HOST:PORT@GENERATION "
                     "(its row in the membership table), not '",
                     absl::CHexEscape(id.substr(0, 256)), "'"));
  }
  p.id = id;
  p.control.set_id(p.id);
  if (p.cluster->needs_silo_endpoint()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an in-process silo cannot use --cluster=", options_.cluster,
        ": its silos serve each other over the silo endpoint (use local, or "
        "a provider of the environment's own)"));
  }
  if (p.cluster->clustered() && !p.env.in_process->transport) {
    return absl::InvalidArgumentError(
        "an in-process silo of a cluster needs a transport");
  }
  return absl::OkStatus();
}

// kPeerCalls: other silos' calls reach the runtime.
void SiloHost::AttachPeers() {
  Parts& p = *parts_;
  if (p.env.in_process.has_value()) {
    if (p.env.in_process->attach) {
      p.env.in_process->attach(p.id, p.silo_address, p.silo.get(),
                               &p.partition);
      p.attached = true;
    }
    return;
  }
  p.peer_gateway->set_address(p.silo_address);
  p.peer_gateway->Attach(p.silo.get());
}

// Stop of kPeerCalls: nothing more arrives from other silos.
void SiloHost::StopPeerCalls() {
  Parts& p = *parts_;
  if (p.attached) {
    p.attached = false;
    if (p.env.in_process->detach) p.env.in_process->detach(p.id);
  }
  if (p.peer_gateway != nullptr) p.peer_gateway->Stop();
  p.StopSiloEndpoint(
      p.halting ? absl::ZeroDuration()
                : p.Left(absl::Milliseconds(500), absl::Milliseconds(500)));
}

// kListeners: the client gateway.
absl::Status SiloHost::StartGateway() {
  Parts& p = *parts_;
  p.gateway = std::make_unique<GatewayServer>(p.silo.get(), options_.gateway,
                                              options_.max_message_bytes,
                                              options_.max_in_flight);
  p.gateway->set_cluster_view([&p](v1::MembershipView* out) {
    if (MembershipAgent* a = p.agent_ptr.load()) *out = a->view();
  });
  p.gateway->set_security(GatewaySecurity(options_), &p.gateway_refused);
  p.gateway->set_limits(ServerLimitsOf(options_),
                        options_.connection_memory_budget,
                        options_.max_gateway_streams);
  GRANARY_RETURN_IF_ERROR(p.gateway->Start());
  rpc::GuardListener(p.gateway->port(), p.listener_caps);
  p.guarded_ports.push_back(p.gateway->port());
  p.listener_watch->Add("gateway", options_.gateway, p.gateway->port());
  return absl::OkStatus();
}

// kListeners: the HTTP endpoint.
absl::Status SiloHost::StartHttp() {
  Parts& p = *parts_;
  p.http = std::make_unique<HttpServer>(
      options_.http, options_.http_threads,
      static_cast<int>(
          absl::ToInt64Milliseconds(options_.http_request_timeout)));
  p.http->AllowHosts(options_.http_hosts);
  if (!options_.http_token_file.empty()) {
    absl::StatusOr<std::unique_ptr<rpc::ReloadingToken>> token =
        rpc::ReloadingToken::Open(options_.http_token_file,
                                  options_.tls_reload);
    if (!token.ok()) return token.status();
    p.http_token = *std::move(token);
    p.http->RequireToken([t = p.http_token.get()] { return t->Current(); },
                         &p.http_refused);
  }
  AddAuthMetrics(&p.silo->metrics_registry(), &p.gateway_refused,
                 &p.http_refused);
  WarnOfPlaintext(options_);
  p.admin = std::make_unique<AdminHttp>(p.silo.get(), gateway_address(),
                                        absl::Seconds(1), p.timers);
  p.admin->Register(p.http.get());  // /metrics, /api/overview, the dashboard
  storage::GrainStorage* store = p.stores.grain_state.get();
  // /readyz and /healthz (silo/readiness.h).
  ServeProbes(p.http.get(),
              ReadinessSources{&p.leaving, &p.agent_ptr, p.silo.get(), store,
                               p.listener_watch.get()});
  p.silo->metrics_registry().AddCallback(
      "granary_storage_healthy",
      "1 while grain storage takes writes; 0 while it cannot (a full disk): "
      "writes then fail UNAVAILABLE and /readyz answers 503.",
      metrics::Type::kGauge, {}, [store] {
        return metrics::Samples{
            {{}, store == nullptr || store->Health().ok() ? 1.0 : 0.0}};
      });
  p.silo->metrics_registry().AddCallback(
      "granary_storage_write_errors_total",
      "Grain storage writes that failed in the store itself (a full disk, "
      "RocksDB background errors), not for a stale etag.",
      metrics::Type::kCounter, {}, [store] {
        return metrics::Samples{
            {{},
             store == nullptr ? 0.0
                              : static_cast<double>(store->WriteErrors())}};
      });
  ListenerWatch* watch = p.listener_watch.get();
  watch->RegisterMetrics(&p.silo->metrics_registry());
  GRANARY_RETURN_IF_ERROR(p.http->Start());
  // Slow clients (slowloris) from one address hold at most a share of the
  // HTTP workers, each for at most --http_request_timeout.
  {
    rpc::ListenerCaps caps = p.listener_caps;
    caps.max_per_peer = options_.http_connections_per_peer > 0
                            ? options_.http_connections_per_peer
                            : std::max(2, options_.http_threads / 4);
    caps.max_per_peer = std::min(caps.max_per_peer, caps.max_connections);
    const int http_port = p.http->port();
    rpc::GuardListener(http_port, caps);
    p.guarded_ports.push_back(http_port);
  }
  return p.admin->Start();
}

}  // namespace granary::silo
