#include "silo/silo_host.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/address.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/member.h"
#include "core/sync.h"
#include "directory/directory_client.h"
#include "directory/directory_service.h"
#include "directory/partition.h"
#include "grpcpp/grpcpp.h"
#include "rpc/callback_queue.h"
#include "rpc/credentials.h"
#include "rpc/listener_guard.h"
#include "rpc/security.h"
#include "silo/admin/admin_http.h"
#include "silo/admin/http_server.h"
#include "silo/cluster/cluster_provider.h"
#include "silo/cluster/cluster_router.h"
#include "silo/cluster/grpc_transport.h"
#include "silo/cluster/membership_agent.h"
#include "silo/cluster/membership_service.h"
#include "silo/cluster/reminder_remote.h"
#include "silo/gateway/gateway_server.h"
#include "silo/gateway/gateway_service.h"
#include "silo/listener_watch.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/silo.h"
#include "silo/silo_host_parts.h"
#include "silo/systemd_notify.h"

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

// Why the silo should get no new work (a supervisor's readiness probe), or
// "" when it is ready.
std::string NotReadyBecause(const std::atomic<bool>& leaving,
                            const std::atomic<MembershipAgent*>& agent,
                            const Silo* silo, storage::GrainStorage* storage) {
  if (leaving.load()) return "shutting down";
  if (agent.load() == nullptr) return "not yet in the cluster";
  if (silo != nullptr && MonoNanos() > silo->lease_until_ns()) {
    // The membership table (PostgreSQL, or the dev primary) has not
    // confirmed this silo lately: it runs no grain code until it does.
    return "the membership table has not confirmed this silo lately";
  }
  if (storage != nullptr && !storage->Health().ok()) {
    return "storage cannot write";
  }
  return "";
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

namespace {

// (0) The open-file limit, raised to its hard limit, sizes the caps on
// connections to the gRPC listeners (rpc/listener_guard.h).
void GuardListeners(const SiloHostOptions& options_, SiloHost::Parts& p) {
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

}  // namespace

SiloHost::SiloHost(SiloHostOptions options)
    : options_(std::move(options)), parts_(std::make_unique<Parts>()) {}

SiloHost::~SiloHost() { Stop(); }

absl::Status SiloHost::AddGrainType(
    const GrainClassInfo& info,
    std::function<std::unique_ptr<Grain>()> factory) {
  if (started_) {
    return absl::FailedPreconditionError("grain types are added before Start");
  }
  grain_adders_.push_back([&info, factory = std::move(factory)](Silo& silo) {
    return silo.AddGrainType(info, factory);
  });
  return absl::OkStatus();
}

void SiloHost::AddGrains(std::function<absl::Status(Silo&)> add) {
  grain_adders_.push_back(std::move(add));
}

void SiloHost::AddIncomingFilter(CallFilter f) {
  AddGrains([f](Silo& s) {
    s.AddIncomingFilter(f);
    return absl::OkStatus();
  });
}
void SiloHost::AddOutgoingFilter(CallFilter f) {
  AddGrains([f](Silo& s) {
    s.AddOutgoingFilter(f);
    return absl::OkStatus();
  });
}

const std::string& SiloHost::gateway_address() const {
  return parts_->gateway->address();
}
const std::string& SiloHost::silo_address() const {
  return parts_->silo_address;
}
const std::string& SiloHost::http_address() const {
  return parts_->http->address();
}
const std::string& SiloHost::id() const { return parts_->id; }
Silo* SiloHost::silo() { return parts_->silo.get(); }

absl::Status SiloHost::Start() {
  if (started_) return absl::FailedPreconditionError("the host was started");
  started_ = true;
  rpc::RouteGrpcLogs();
  GRANARY_RETURN_IF_ERROR(ValidateSiloHostOptions(options_));
  GuardListeners(options_, *parts_);
  GRANARY_RETURN_IF_ERROR(StartStores());
  GRANARY_RETURN_IF_ERROR(StartSiloEndpoint());
  GRANARY_RETURN_IF_ERROR(StartRuntime());
  GRANARY_RETURN_IF_ERROR(StartListeners());
  GRANARY_RETURN_IF_ERROR(JoinCluster());
  // Under systemd (Type=notify) the unit counts as started from here.
  if (absl::Status s = NotifySystemd(
          absl::StrCat("READY=1\nSTATUS=serving: gateway ", gateway_address(),
                       ", silo ", silo_address()));
      !s.ok()) {
    GRANARY_LOG(kWarning) << "silo=" << id() << " " << s.message();
  }
  return absl::OkStatus();
}

// (1) The options of failure detection, the stores and the cluster.
absl::Status SiloHost::StartStores() {
  Parts& p = *parts_;
  p.membership.probe_interval = options_.probe_interval;
  p.membership.probe_timeout = options_.probe_timeout;
  p.membership.missed_probes = options_.missed_probes;
  p.membership.votes_to_kill = options_.votes_to_kill;
  p.membership.table_host = options_.primary;
  absl::StatusOr<std::unique_ptr<ClusterProvider>> cluster =
      options_.providers.cluster.at(options_.cluster)(options_);
  if (!cluster.ok()) return cluster.status();
  p.cluster = *std::move(cluster);
  if (p.cluster->clustered() && !options_.unsafe_disable_lease_for_testing) {
    // Grain code runs only while the table confirms this silo (see
    // MembershipOptions::lease).
    p.membership.lease = SafeLease(p.membership);
  }
  if (options_.unsafe_disable_lease_for_testing) {
    GRANARY_LOG(kWarning) << "--unsafe_disable_lease_for_testing: grain code "
                             "runs without a membership lease (tests only)";
  }
  if (absl::Status s = ValidateMembershipOptions(p.membership); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("membership options: ", s.message()));
  }
  absl::StatusOr<StorageStores> stores =
      options_.providers.storage.at(EffectiveStorage(options_))(options_);
  if (!stores.ok()) return stores.status();
  p.stores = *std::move(stores);
  return absl::OkStatus();
}

// (2) The silo-to-silo endpoint: liveness probes, the gateway protocol for
// calls from other silos, this silo's part of the directory in a cluster,
// what the cluster provider serves, and the standard health service.
absl::Status SiloHost::StartSiloEndpoint() {
  Parts& p = *parts_;
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
          Silo* silo = p.silo_ptr.load();
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

// (3) The runtime with its grain types; in a cluster, calls for grains not
// active here go where the directory says (silo/cluster/cluster_router.h).
absl::Status SiloHost::StartRuntime() {
  Parts& p = *parts_;
  SiloOptions options;
  options.name = p.id;
  options.workers = options_.workers;
  options.turn_budget = options_.turn_budget;
  options.network_turns = options_.network_turns;
  options.storage = p.cluster->grain_storage(p.stores.grain_state.get());
  options.reminders = p.stores.reminders.get();
  options.min_reminder_period = options_.min_reminder_period;
  options.max_reminders_per_grain = options_.max_reminders_per_grain;
  options.max_reminders = options_.max_reminders;
  options.slow_turn_threshold = options_.slow_turn_threshold;
  options.max_mailbox = options_.max_mailbox;
  options.max_activations = options_.max_activations;
  options.memory_limit = options_.memory_limit;
  options.remote_memory_limit = options_.silo_memory_budget;
  options.shutdown_timeout = options_.shutdown_timeout / 3;
  p.silo = std::make_unique<Silo>(options);
  // A silo whose lease lapsed runs no grain code: probes see it unhealthy,
  // so a silo cut off from the membership table alone is declared dead.
  p.control.set_health([silo = p.silo.get()]() -> absl::Status {
    if (MonoNanos() <= silo->lease_until_ns()) return absl::OkStatus();
    return absl::UnavailableError(
        "this silo's membership lease has lapsed (it cannot confirm its "
        "membership in the table)");
  });
  for (const auto& add : grain_adders_) GRANARY_RETURN_IF_ERROR(add(*p.silo));
  p.silo_ptr.store(p.silo.get());
  p.partition.set_self_id(p.id);
  // A silo declared dead may run grain code until its lease ends: its
  // grains are not activated elsewhere before that. (The other silos'
  // leases are as long as this one's would be, whether or not this silo
  // runs without one.)
  if (p.cluster->clustered()) {
    p.partition.set_dead_grace(SafeLease(p.membership));
  }
  if (p.cluster->clustered()) {
    std::vector<const InterfaceInfo*> interfaces;
    for (const GrainClassInfo* t : p.silo->GrainTypes()) {
      interfaces.push_back(t->interface);
    }
    p.transport = std::make_unique<GrpcTransport>(
        p.id, std::move(interfaces), absl::Seconds(2),
        ClusterClientSecurity(options_));
    GRANARY_RETURN_IF_ERROR(p.transport->Start());
    p.directory = std::make_unique<directory::DirectoryClient>(
        &p.partition, p.transport.get());
    p.router = std::make_unique<ClusterRouter>(
        p.silo.get(), &p.partition, p.directory.get(), p.transport.get());
    GRANARY_RETURN_IF_ERROR(p.router->Start());
    p.silo->SetRouter(p.router.get());
  }
  if (ReminderKeeper* keeper = p.cluster->reminder_keeper()) {
    p.silo->reminders().SetKeeper(keeper);
  }
  if (p.cluster->reminders_by_range()) {
    // Each silo schedules the reminders of its range of the ring.
    p.range_reminders = std::make_unique<RangeReminders>(
        [&p](const GrainId& grain) {
          const std::string owner = p.partition.OwnerOf(grain);
          return owner.substr(0, owner.rfind('@'));  // its silo endpoint
        },
        ClusterClientSecurity(options_));
    p.silo->reminders().SetKeeper(p.range_reminders.get());
    p.silo->reminders().SetRanges([&p](const GrainId& grain) {
      return p.partition.OwnerOf(grain) == p.id;
    });
  }
  GRANARY_RETURN_IF_ERROR(p.silo->Start());
  if (p.directory != nullptr) {
    p.cluster->SetGrainHostCheck([directory = p.directory.get(),
                                  silo = p.silo.get()](rpc::PeerAuthority peer,
                                                       GrainId grain) {
      return CheckGrainHost(directory, silo, std::move(peer), std::move(grain));
    });
  }
  p.cluster->OnSiloStarted(p.silo.get());
  p.peer_gateway->set_address(p.silo_address);
  p.peer_gateway->Attach(p.silo.get());
  return absl::OkStatus();
}

// (4) The client gateway and the HTTP endpoint.
absl::Status SiloHost::StartListeners() {
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
  p.admin = std::make_unique<AdminHttp>(p.silo.get(), p.gateway->address());
  p.admin->Register(p.http.get());  // /metrics, /api/overview, the dashboard
  // /readyz: 200 while the silo takes work; 503 (and why) while it joins,
  // leaves, has not been confirmed by the membership table within its lease
  // (the table's database is down), or its storage cannot write (the reason
  // is in its log).
  storage::GrainStorage* store = p.stores.grain_state.get();
  p.http->Handle("/readyz", [&p, store](const HttpRequest&) {
    std::string why = p.listener_watch->NotReadyBecause();
    if (why.empty()) {
      why = NotReadyBecause(p.leaving, p.agent_ptr, p.silo.get(), store);
    }
    if (why.empty())
      return HttpResponse{200, "text/plain; charset=utf-8", "ready\n"};
    return HttpResponse{503, "text/plain; charset=utf-8",
                        absl::StrCat("not ready: ", why, "\n")};
  });
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
  // /healthz: 200 unless a gRPC listener has stopped accepting (a
  // supervisor then restarts the silo).
  ListenerWatch* watch = p.listener_watch.get();
  p.http->Handle("/healthz", [watch](const HttpRequest&) {
    const std::string why = watch->UnhealthyBecause();
    if (why.empty())
      return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"};
    return HttpResponse{503, "text/plain; charset=utf-8",
                        absl::StrCat("unhealthy: ", why, "\n")};
  });
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
  GRANARY_RETURN_IF_ERROR(p.admin->Start());
  watch->Start();
  return absl::OkStatus();
}

// (5) Joins the membership table (a table of one with the local provider).
}  // namespace granary::silo
