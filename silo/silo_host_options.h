// File: silo/silo_host_options.h
// -----------------------------------------------------------------------------
// Everything a silo host (silo/silo_host.h) is configured with: one field per
// `granary-silo` flag (the flag of the same name documents it too). What
// the silo runs in (its clock, its network, the providers `storage` and
// `cluster` name) is its environment (silo/silo_environment.h).
//
//   SiloHostOptions options;
//   options.gateway = "127.0.0.1:0";
//   options.storage = "memory";
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/limits.h"
#include "rpc/security.h"

namespace granary::silo {

// The storage provider `options` names: `storage`, or its default for the
// cluster provider.
struct SiloHostOptions;
std::string EffectiveStorage(const SiloHostOptions& options);

struct SiloHostOptions {
  // Listeners, HOST:PORT (port 0: any free port). An empty `gateway` or
  // `http`: no client gateway, or no HTTP endpoint (a silo reached in
  // process only, or only by other silos).
  std::string gateway = "127.0.0.1:30000";
  std::string silo = "127.0.0.1:11111";
  // Where the other silos reach the silo endpoint, when not `silo` (behind a
  // proxy, NAT or a port mapping); it names the silo in the membership table.
  std::string silo_advertise;
  // Where clients reach the gateway, when not `gateway`: what the
  // membership table names, so what clients that learn gateways from it
  // dial (see AdvertisedGateway).
  std::string gateway_advertise;
  std::string http = "127.0.0.1:8080";
  // A file holding the bearer token every HTTP path but /healthz needs;
  // required for `http` off loopback.
  std::string http_token_file;
  // The HTTP endpoint's worker threads, and how long a client may take to
  // send a whole request (silo/admin/http_server.h).
  int http_threads = 4;
  absl::Duration http_request_timeout = absl::Seconds(2);
  // Connections one peer address may hold open on the HTTP endpoint at
  // once (0: a quarter of http_threads, at least 2), so that slow clients
  // from one address never hold every worker and the probes always find
  // one.
  int http_connections_per_peer = 0;
  // The gateway's TLS (certificate and key), client certificates (CA) and
  // bearer tokens (a NAME TOKEN file): rpc/security.h, GatewaySecurity().
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string auth_tokens;
  // Mutual TLS between silos: the cluster CA, and this silo's certificate
  // and key (ClusterServerSecurity(), ClusterClientSecurity()).
  std::string cluster_ca;
  std::string cluster_tls_cert;
  std::string cluster_tls_key;
  // How often certificate and token files are checked for changes.
  absl::Duration tls_reload = absl::Seconds(10);
  // Allow `gateway` or `silo` off loopback without TLS.
  bool allow_plaintext = false;
  // Host names the HTTP port's Host header may name besides IP addresses
  // and localhost (HttpServer::AllowHosts: against DNS rebinding).
  std::vector<std::string> http_hosts;
  // Allow `gateway` off loopback with no client authentication (neither
  // auth_tokens nor tls_client_ca): anyone who reaches it may call.
  bool allow_anonymous = false;
  // Allow a PostgreSQL server off this machine without sslmode=verify-full
  // (storage::CheckConninfoTransport).
  bool allow_insecure_postgres = false;
  // This silo's data (RocksDB); created if missing.
  std::string data_dir = "./granary-data";
  // Worker threads (0: hardware threads) and messages per scheduling.
  int workers = 0;
  int turn_budget = 64;
  // SiloOptions::network_turns.
  bool network_turns = true;
  // Empty polls a worker makes before it sleeps (SiloOptions::idle_spin; 0
  // when the cores are wanted by other work on the machine).
  int idle_spin = 200;
  // An activation with no call for idle_timeout (unless its type says
  // otherwise) is deactivated; idle activations are looked for every
  // collection_period.
  absl::Duration idle_timeout = absl::Minutes(10);
  absl::Duration collection_period = absl::Seconds(1);
  // Turns longer than this are logged and counted.
  absl::Duration slow_turn_threshold = absl::Milliseconds(100);
  // Largest message the gateway accepts or sends.
  int max_message_bytes = 4 << 20;
  // Unfinished calls per client connection past which the gateway stops
  // reading it.
  int max_in_flight = 16384;
  // Bytes one client connection's unfinished calls and unwritten replies
  // may hold before the gateway stops reading it, and all client
  // connections together (then every client stream pauses and the
  // standard gRPC services refuse with RESOURCE_EXHAUSTED).
  int64_t connection_memory_budget = int64_t{32} << 20;
  int64_t silo_memory_budget = int64_t{512} << 20;
  // Requests queued at one activation past which new ones fail
  // RESOURCE_EXHAUSTED (one-way calls push back on their sender instead).
  int max_mailbox = 16384;
  // How long a one-way sender is held back (pushback) at most while the
  // target's mailbox is full.
  absl::Duration max_pushback_wait = absl::Seconds(1);
  // Memory pressure (SiloOptions): activations held at most, and resident
  // memory past which idle activations are shed and new ones refused (0:
  // no limit).
  int64_t max_activations = 1'000'000;
  int64_t memory_limit = 0;
  // gRPC's buffer memory, streams per connection and keepalive, on every
  // server of the silo (rpc/limits.h; max_message_bytes is the above).
  int64_t grpc_memory_bytes = int64_t{512} << 20;
  int max_streams_per_connection = 128;
  // Gateway-protocol streams open at once on the client gateway.
  int max_gateway_streams = 16384;
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // rpc::ServerLimits::handshake_timeout, on every server of the silo.
  absl::Duration handshake_timeout = absl::Seconds(5);
  // rpc::ServerLimits::max_connection_age and its grace, likewise.
  absl::Duration max_connection_age = absl::Minutes(30);
  absl::Duration max_connection_age_grace = absl::Minutes(1);
  // Connections open at once on each gRPC listener (the gateway, the silo
  // port), and from one peer address on each (rpc/listener_guard.h); 0:
  // sized from the open-file limit (rpc::DefaultListenerCaps).
  int max_connections = 0;
  int max_connections_per_peer = 0;
  // How often each gRPC listener is probed over its real port (a listener
  // that stops accepting fails /readyz, then /healthz); 0: never.
  absl::Duration listener_probe_period = absl::Seconds(5);
  // Grain state and reminders: a name in providers.storage (rocksdb,
  // memory, postgres); empty: postgres with cluster "postgres", else
  // rocksdb (EffectiveStorage).
  std::string storage;
  // RocksDB writes: sync or async.
  std::string durability = "sync";
  // The shortest period of a durable reminder.
  absl::Duration min_reminder_period = absl::Seconds(1);
  // Reminders one grain, and the whole silo, may have scheduled
  // (RESOURCE_EXHAUSTED past them).
  int max_reminders_per_grain = 64;
  int64_t max_reminders = 100'000;
  // Membership: a name in providers.cluster (local, dev, postgres), and
  // with dev the primary's silo endpoint (empty on the primary).
  std::string cluster = "local";
  std::string primary;
  // PostgreSQL (cluster or storage "postgres"): the libpq connection
  // string or URI, or a file holding it (for secrets; surrounding
  // whitespace dropped); with neither, the environment's GRANARY_POSTGRES.
  std::string postgres;
  std::string postgres_file;
  // The cluster's name in the database: clusters of other names share it
  // without seeing each other.
  std::string cluster_id = "default";
  // Connections of the grain-state and reminder pool (the membership table
  // has two of its own), and so statements in flight at once.
  int postgres_connections = 4;
  // Dead silos' rows older than this are deleted from the membership table.
  absl::Duration dead_retention = absl::Hours(24);
  // Failure detection (silo/cluster/membership_agent.h).
  absl::Duration probe_interval = absl::Seconds(1);
  absl::Duration probe_timeout = absl::Milliseconds(500);
  int missed_probes = 2;
  int votes_to_kill = 2;
  // Calls for grains whose silo the directory cannot name yet (its owner
  // unreachable, a ring changing) are retried after route_retry_delay,
  // doubling up to 500 ms, and fail UNAVAILABLE after route_timeout.
  absl::Duration route_retry_delay = absl::Milliseconds(20);
  absl::Duration route_timeout = absl::Seconds(30);
  // How long to keep trying to join the cluster.
  absl::Duration join_timeout = absl::Seconds(30);
  // How long a graceful stop takes (SiloHost::Stop): leaving the
  // membership, grains deactivating (a third of it), clients and other
  // silos moving their calls elsewhere (at least 3 s more when the grains
  // took it all). What is left after it is cancelled.
  absl::Duration shutdown_timeout = absl::Seconds(30);
  // FOR TESTS ONLY; breaks the cluster's single-activation guarantee. No
  // membership lease: a silo cut off from the table keeps running grain
  // code until it learns it was declared dead. It exists so the partition
  // test can show that the lease is what keeps a grain from answering from
  // two activations.
  bool unsafe_disable_lease_for_testing = false;
  // Runs when the cluster declares this silo dead (its grains live
  // elsewhere now). Default: log and exit the process with status 3 at once.
  std::function<void()> on_declared_dead;
};

// What the gateway serves and the silo port serves and dials with, from
// the tls_* / cluster_* fields.
rpc::ServerSecurity GatewaySecurity(const SiloHostOptions& options);
rpc::ServerSecurity ClusterServerSecurity(const SiloHostOptions& options);
rpc::ClientSecurity ClusterClientSecurity(const SiloHostOptions& options);

// gRPC's limits for every server of the silo, from the fields above.
rpc::ServerLimits ServerLimitsOf(const SiloHostOptions& options);

// The smallest --max_message_bytes: a request batch must hold a request.
inline constexpr int kMinMessageBytes = 4096;

// OK, or INVALID_ARGUMENT naming the flag that is wrong.
absl::Status ValidateSiloHostOptions(const SiloHostOptions& options);

// The gateway address the membership table names for a gateway bound at
// `bound`: gateway_advertise when set; else `bound`, except that a wildcard
// host (0.0.0.0, ::), which no client can dial, becomes the host of
// silo_advertise (in a container or pod, its reachable name).
std::string AdvertisedGateway(const SiloHostOptions& options,
                              const std::string& bound);

}  // namespace granary::silo
