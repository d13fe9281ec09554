#include "silo/silo_flags.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/flags_usage.h"
#include "core/log.h"
#include "silo/silo_environment.h"
#include "storage/postgres/pg_connection.h"

ABSL_FLAG(
    std::string, gateway, "127.0.0.1:30000",
    "HOST:PORT of the gateway clients connect to (port 0: any free port).");
ABSL_FLAG(std::string, silo, "127.0.0.1:11111",
          "HOST:PORT of the silo-to-silo endpoint (port 0: any free port).");
ABSL_FLAG(std::string, silo_advertise, "",
          "HOST:PORT at which the other silos reach this silo's endpoint, when "
          "not --silo (behind a proxy, NAT or a container's port mapping). "
          "It names the silo in the membership table.");
ABSL_FLAG(std::string, gateway_advertise, "",
          "HOST:PORT at which clients reach this silo's gateway, when not "
          "--gateway. The membership table names it, so it is what clients "
          "that learn gateways from the cluster dial. Default: --gateway, "
          "with a wildcard host (0.0.0.0, ::) replaced by the host of "
          "--silo_advertise.");
ABSL_FLAG(std::string, http, "127.0.0.1:8080",
          "HOST:PORT of the HTTP endpoint (port 0: any free port).");
ABSL_FLAG(int32_t, http_threads, 4,
          "Worker threads of the HTTP endpoint (1 to 1024): each client holds "
          "one while it sends its request, so this many slow clients at once "
          "can hold up /healthz for up to --http_request_timeout.");
ABSL_FLAG(int32_t, http_connections_per_peer, 0,
          "Connections one peer address (an IPv4 address, an IPv6 /64) may "
          "hold open on the HTTP endpoint at once; more are closed as soon "
          "as they are accepted (0: a quarter of --http_threads, at least "
          "2). Slow clients from one address then never hold every worker, "
          "so a probe from another address is always served.");
ABSL_FLAG(absl::Duration, http_request_timeout, absl::Seconds(2),
          "An HTTP client that has not sent a whole request after this long "
          "is dropped (100ms to 1m).");
ABSL_FLAG(std::string, data_dir, "./granary-data",
          "Directory for this silo's data; created if missing.");
ABSL_FLAG(int32_t, workers, 0, "Worker threads (0: hardware threads).");
ABSL_FLAG(int32_t, turn_budget, 64,
          "Messages one activation processes per scheduling.");
ABSL_FLAG(bool, network_turns, true,
          "When every worker sleeps, the gateway thread that read a request "
          "runs its turn itself (a few turns at most), saving a worker "
          "wake-up; false: workers run every turn.");
ABSL_FLAG(int32_t, idle_spin, 200,
          "Empty polls a worker makes before it sleeps (0 to 1000000): "
          "lower leaves the cores to other work on the machine, higher wakes "
          "faster.");
ABSL_FLAG(absl::Duration, idle_timeout, absl::Minutes(10),
          "An activation with no call for this long is deactivated, unless "
          "its grain type sets its own idle timeout.");
ABSL_FLAG(absl::Duration, collection_period, absl::Seconds(1),
          "How often idle activations are looked for.");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error.");
ABSL_FLAG(std::string, log_format, "text",
          "text (one line per event: time, level, key=value fields, message) "
          "or json (one JSON object per line).");
ABSL_FLAG(absl::Duration, slow_turn_threshold, absl::Milliseconds(100),
          "A turn holding a worker longer than this is logged (with its grain "
          "and method) and counted in granary_slow_turns_total.");
ABSL_FLAG(std::string, http_token_file, "",
          "A file holding a bearer token that every HTTP path but /healthz "
          "then requires (Authorization: Bearer TOKEN). Needed for --http "
          "off loopback.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the gateway: with --tls_key, the gateway "
          "serves TLS only. Reloaded when the file changes.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "With --tls_cert: clients must present a certificate that chains "
          "to this PEM CA (mutual TLS); its subject is the caller's identity.");
ABSL_FLAG(std::string, auth_tokens, "",
          "A file of NAME TOKEN lines (# comments): every gateway call but "
          "health checks then needs metadata authorization: Bearer TOKEN, "
          "and NAME is the caller's identity. Reloaded when the file "
          "changes.");
ABSL_FLAG(std::string, cluster_ca, "",
          "PEM CA of the cluster: with --cluster_tls_cert and "
          "--cluster_tls_key, the silo-to-silo port and every connection to "
          "other silos use mutual TLS, and only certificates of this CA are "
          "accepted there.");
ABSL_FLAG(std::string, cluster_tls_cert, "",
          "PEM certificate chain this silo presents to other silos (as "
          "server and as client), issued by --cluster_ca.");
ABSL_FLAG(std::string, cluster_tls_key, "",
          "PEM private key of --cluster_tls_cert.");
ABSL_FLAG(absl::Duration, tls_reload, absl::Seconds(10),
          "How often certificate, key and token files are checked for "
          "changes.");
ABSL_FLAG(bool, allow_plaintext, false,
          "Allow --gateway or --silo on a non-loopback address without TLS "
          "(logged as a warning). Anything that reaches a plaintext silo "
          "port can act as a silo.");
ABSL_FLAG(std::vector<std::string>, http_hosts, {},
          "Host names (comma-separated) that requests to --http may name in "
          "their Host header, besides IP addresses and localhost; a request "
          "naming another is refused 403, so a DNS-rebinding web page cannot "
          "read the metrics through a browser.");
ABSL_FLAG(bool, allow_insecure_postgres, false,
          "Allow a PostgreSQL server that is not on this machine without "
          "sslmode=verify-full in the connection string: the password, grain "
          "state and membership then cross the network unchecked, and "
          "whoever answers at that address is taken for the database.");
ABSL_FLAG(bool, allow_anonymous, false,
          "Allow --gateway on a non-loopback address with no client "
          "authentication (neither --auth_tokens nor --tls_client_ca): "
          "anyone who reaches it may call any grain.");
ABSL_FLAG(int32_t, max_message_bytes, 4 << 20,
          "Largest message the gateway accepts or sends.");
ABSL_FLAG(int32_t, max_in_flight, 16384,
          "Unfinished calls per client connection past which the gateway "
          "stops reading it (gRPC flow control then holds the client back).");
ABSL_FLAG(int64_t, connection_memory_budget, int64_t{32} << 20,
          "Bytes one client connection's unfinished calls and unwritten "
          "replies may hold (one-way calls count until they ran) before the "
          "gateway stops reading it. At least --max_message_bytes.");
ABSL_FLAG(int64_t, silo_memory_budget, int64_t{512} << 20,
          "Bytes all client connections together may hold, counted like "
          "--connection_memory_budget; past it every client stream pauses "
          "and the standard gRPC services answer RESOURCE_EXHAUSTED.");
ABSL_FLAG(int32_t, max_mailbox, 16384,
          "Calls queued at one activation past which new requests fail "
          "RESOURCE_EXHAUSTED; one-way calls are queued and push back on "
          "their sender's budget instead.");
ABSL_FLAG(absl::Duration, route_retry_delay, absl::Milliseconds(20),
          "A call whose grain's silo the directory cannot name yet (its "
          "owner unreachable, the ring changing) is retried after this, "
          "doubling up to 500ms (1ms to 10s).");
ABSL_FLAG(absl::Duration, route_timeout, absl::Seconds(30),
          "How long such a call keeps being retried before it fails "
          "UNAVAILABLE (100ms to 10m).");
ABSL_FLAG(absl::Duration, max_pushback_wait, absl::Seconds(1),
          "How long a one-way sender is held back at most while the target "
          "activation's mailbox is full (0 to 10m).");
ABSL_FLAG(int64_t, max_activations, 1'000'000,
          "Activations this silo holds at most: past 90% the least recently "
          "used idle ones are deactivated down to 80%, and at the limit a "
          "call that would create one fails RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, memory_limit, 0,
          "Resident memory in bytes past which idle activations are "
          "deactivated (least recently used first, a tenth per check) and "
          "new ones refused with RESOURCE_EXHAUSTED; 0: none. At least 64 "
          "MiB.");
ABSL_FLAG(int64_t, grpc_memory_bytes, int64_t{512} << 20,
          "Memory gRPC may use for connection buffers on each of the silo's "
          "ports (a gRPC ResourceQuota; at least 16 MiB).");
ABSL_FLAG(int32_t, max_streams_per_connection, 128,
          "Calls one connection may have open at once on each port (HTTP/2 "
          "MAX_CONCURRENT_STREAMS); more wait in the client.");
ABSL_FLAG(int32_t, max_gateway_streams, 16384,
          "Gateway-protocol streams (SDK connections) open at once on the "
          "client gateway; more are refused with RESOURCE_EXHAUSTED. Each "
          "costs about 20 KiB.");
ABSL_FLAG(absl::Duration, keepalive_time, absl::Seconds(30),
          "A connection silent this long is pinged, and closed when the ping "
          "is not answered within --keepalive_timeout. Clients may ping "
          "every 10s at most.");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(10),
          "How long a keepalive ping may go unanswered.");
ABSL_FLAG(absl::Duration, handshake_timeout, absl::Seconds(5),
          "A new connection to the gateway or silo port that has not "
          "finished its TLS handshake and sent its HTTP/2 settings within "
          "this is closed (100ms to 10m).");
ABSL_FLAG(absl::Duration, max_connection_age, absl::Minutes(30),
          "A connection to the gateway or silo port this old (±10%) is told "
          "to go; clients move their calls to a new one, where tokens and "
          "certificates are checked again, so revoking one ends its open "
          "connections too (1s to 576h).");
ABSL_FLAG(absl::Duration, max_connection_age_grace, absl::Minutes(1),
          "How long calls on a connection told to go may still finish "
          "before it is closed (1s to 24h).");
ABSL_FLAG(int32_t, max_connections, 0,
          "Connections open at once on each gRPC port (gateway, silo); more "
          "are closed as soon as they are accepted. 0: sized from the "
          "open-file limit (raised to its hard limit at start): a reserve of "
          "max(256, limit/8) is kept for files and outgoing connections, "
          "and each port gets an equal share of the rest.");
ABSL_FLAG(int32_t, max_connections_per_peer, 0,
          "Of --max_connections, connections one peer address (IPv4 "
          "address, IPv6 /64) may hold open on each gRPC port. 0: an eighth "
          "of the port's share, at least 16.");
ABSL_FLAG(absl::Duration, listener_probe_period, absl::Seconds(5),
          "How often the silo connects to each of its gRPC ports to prove "
          "it still accepts; one that does not fails /readyz, and after "
          "three probes in a row /healthz. 0: never.");
ABSL_FLAG(std::string, storage, "",
          "Where grain state and reminders live: rocksdb (in --data_dir; "
          "survives restarts and kill -9), memory (lost when the silo stops) "
          "or postgres (the database of --postgres, shared by the cluster). "
          "Default: postgres with --cluster=postgres, else rocksdb.");
ABSL_FLAG(std::string, durability, "sync",
          "RocksDB writes: sync (an acknowledged write survives power loss) "
          "or async (survives a crash of the process, not of the machine).");
ABSL_FLAG(int32_t, max_reminders_per_grain, 64,
          "Durable reminders one grain may have; registering one more (a new "
          "name) fails RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, max_reminders, 100000,
          "Durable reminders this silo schedules at most; registering one "
          "more fails RESOURCE_EXHAUSTED. With --min_reminder_period this "
          "bounds the ticks per second.");
ABSL_FLAG(absl::Duration, min_reminder_period, absl::Seconds(1),
          "The shortest period a grain may give a durable reminder "
          "(e.g. 1s, 500ms, 1m).");
ABSL_FLAG(std::string, cluster, "local",
          "local (this silo alone), dev (a cluster on one host: the silo "
          "without --primary hosts the membership table, the others name its "
          "--silo endpoint with --primary) or postgres (production: the "
          "membership table, grain state and reminders in the PostgreSQL "
          "database of --postgres; every silo equal).");
ABSL_FLAG(std::string, primary, "",
          "With --cluster=dev: HOST:PORT of the primary's silo endpoint.");
ABSL_FLAG(std::string, postgres, "",
          "With --cluster=postgres or --storage=postgres: the libpq "
          "connection string or URI of the database. It may hold a password: "
          "prefer --postgres_file or the GRANARY_POSTGRES environment "
          "variable, which are used when this flag is empty. Never logged "
          "with its password.");
ABSL_FLAG(std::string, postgres_file, "",
          "A file holding the PostgreSQL connection string (for secrets).");
ABSL_FLAG(std::string, cluster_id, "default",
          "The cluster's name in the database: clusters with other names "
          "share it without seeing each other (letters, digits, - _ .).");
ABSL_FLAG(int32_t, postgres_connections, 4,
          "PostgreSQL connections for grain state and reminders: statements "
          "in flight at once (the membership table has two of its own).");
ABSL_FLAG(absl::Duration, dead_retention, absl::Hours(24),
          "Rows of dead silos older than this are deleted from the "
          "membership table (PostgreSQL's, or a dev cluster primary's), at "
          "its next write.");
ABSL_FLAG(absl::Duration, probe_interval, absl::Seconds(1),
          "How often a silo probes the silos after it on the ring.");
ABSL_FLAG(absl::Duration, probe_timeout, absl::Milliseconds(500),
          "How long a probe may take before it counts as missed.");
ABSL_FLAG(int32_t, missed_probes, 2,
          "Consecutive missed probes after which a silo votes the other dead.");
ABSL_FLAG(int32_t, votes_to_kill, 2,
          "Fresh votes that declare a silo dead (fewer when fewer silos are "
          "alive to vote).");
ABSL_FLAG(absl::Duration, join_timeout, absl::Seconds(30),
          "How long to keep trying to join the cluster (reach the primary, "
          "or the PostgreSQL server) before giving up.");
ABSL_FLAG(absl::Duration, shutdown_timeout, absl::Seconds(30),
          "How long a graceful stop (SIGTERM) may take: leaving the cluster, "
          "grains deactivating (at most a third of it), clients and other "
          "silos sending their calls elsewhere (which get at least 3 s "
          "more when the grains took it all). Give a supervisor's kill "
          "timeout (Kubernetes' terminationGracePeriodSeconds, systemd's "
          "TimeoutStopSec) at least 5 s more than this.");
ABSL_FLAG(bool, unsafe_disable_lease_for_testing, false,
          "FOR TESTS ONLY: breaks the cluster's single-activation guarantee. "
          "This silo runs grain code without a membership lease, so when cut "
          "off from the table it keeps answering after the others declared "
          "it dead. Exists to show that the partition tests fail without the "
          "lease.");
ABSL_FLAG(bool, check_config, false,
          "Check the configuration (flags, environment, config file, the files "
          "and certificates they name), print the effective flags with "
          "secrets redacted, and exit: 0 when the silo would start with "
          "them, 2 (with the reason) when not. Binds nothing and touches no "
          "database.");
ABSL_FLAG(std::string, config, "",
          "A file of these flags, one --name=value per line (# comments). "
          "Every flag may also come from the environment as GRANARY_<FLAG> "
          "(GRANARY_WORKERS=4 for --workers=4); the command line wins over "
          "the environment, which wins over this file.");

namespace granary::silo {
namespace {

// The binary's own flags (not Abseil's --flagfile, --help...), by name.
std::vector<std::pair<std::string, absl::CommandLineFlag*>> OwnFlags() {
  std::vector<std::pair<std::string, absl::CommandLineFlag*>> ours;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StrContains(flag->Filename(), "absl/")) {
      ours.emplace_back(std::string(name), flag);
    }
  }
  std::sort(ours.begin(), ours.end());
  return ours;
}

// The environment variable that may set flag `name`: GRANARY_<NAME>.
std::string EnvName(absl::string_view name) {
  return absl::StrCat("GRANARY_", absl::AsciiStrToUpper(name));
}

// The arguments Abseil parses, in rising precedence: the `--config` file
// (read as an Abseil flag file), then GRANARY_<FLAG> variables for the
// binary's own flags, then the rest of the command line. A flag set from the
// environment to a value it does not take fails here, naming the variable.
std::vector<char*> ArgsWithConfigAndEnvironment(
    int argc, char** argv, std::deque<std::string>* storage) {
  std::string config;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--config=")) {
      config = arg.substr(9);
    } else if (arg == "--config" && i + 1 < argc) {
      config = argv[++i];
    } else {
      rest.push_back(arg);
    }
  }
  std::vector<std::string> from_env;
  for (const auto& [name, flag] : OwnFlags()) {
    const std::string var = EnvName(name);
    const char* value = std::getenv(var.c_str());
    if (value == nullptr) continue;
    if (name == "config") {
      if (config.empty()) config = value;
      continue;
    }
    // Checked here so that a bad value names its variable (the flag is set
    // again, in order, by the parse that follows).
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      std::fprintf(stderr, "%s: %s\n", var.c_str(), error.c_str());
      std::exit(2);
    }
    from_env.push_back(absl::StrCat("--", name, "=", value));
  }
  const size_t first = storage->size();
  storage->push_back(argv[0]);
  if (!config.empty()) storage->push_back("--flagfile=" + config);
  for (auto& a : from_env) storage->push_back(std::move(a));
  for (auto& a : rest) storage->push_back(std::move(a));
  std::vector<char*> out;
  for (size_t i = first; i < storage->size(); ++i) {
    out.push_back((*storage)[i].data());
  }
  return out;
}

}  // namespace

void ParseSiloFlags(int argc, char** argv) {
  // Kept for the process's life: Abseil keeps pointers into argv (a deque,
  // so that strings already handed out never move).
  static auto* storage = new std::deque<std::string>;
  std::vector<char*> args = ArgsWithConfigAndEnvironment(argc, argv, storage);
  UseGranaryFlagsUsage();
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
}

absl::StatusOr<SiloHostOptions> SiloHostOptionsFromFlags() {
  LogLevel level;
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    return absl::InvalidArgumentError(
        "--log_level must be debug, info, warning or error");
  }
  SetLogLevel(level);
  LogFormat format;
  if (!ParseLogFormat(absl::GetFlag(FLAGS_log_format), &format)) {
    return absl::InvalidArgumentError("--log_format must be text or json");
  }
  SetLogFormat(format);
  SiloHostOptions o;
  o.gateway = absl::GetFlag(FLAGS_gateway);
  o.silo = absl::GetFlag(FLAGS_silo);
  o.silo_advertise = absl::GetFlag(FLAGS_silo_advertise);
  o.gateway_advertise = absl::GetFlag(FLAGS_gateway_advertise);
  o.http = absl::GetFlag(FLAGS_http);
  o.http_token_file = absl::GetFlag(FLAGS_http_token_file);
  o.http_threads = absl::GetFlag(FLAGS_http_threads);
  o.http_request_timeout = absl::GetFlag(FLAGS_http_request_timeout);
  o.http_connections_per_peer = absl::GetFlag(FLAGS_http_connections_per_peer);
  o.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key = absl::GetFlag(FLAGS_tls_key);
  o.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  o.auth_tokens = absl::GetFlag(FLAGS_auth_tokens);
  o.cluster_ca = absl::GetFlag(FLAGS_cluster_ca);
  o.cluster_tls_cert = absl::GetFlag(FLAGS_cluster_tls_cert);
  o.cluster_tls_key = absl::GetFlag(FLAGS_cluster_tls_key);
  o.tls_reload = absl::GetFlag(FLAGS_tls_reload);
  o.allow_plaintext = absl::GetFlag(FLAGS_allow_plaintext);
  o.allow_anonymous = absl::GetFlag(FLAGS_allow_anonymous);
  o.allow_insecure_postgres = absl::GetFlag(FLAGS_allow_insecure_postgres);
  o.http_hosts = absl::GetFlag(FLAGS_http_hosts);
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.turn_budget = absl::GetFlag(FLAGS_turn_budget);
  o.network_turns = absl::GetFlag(FLAGS_network_turns);
  o.idle_spin = absl::GetFlag(FLAGS_idle_spin);
  o.idle_timeout = absl::GetFlag(FLAGS_idle_timeout);
  o.collection_period = absl::GetFlag(FLAGS_collection_period);
  o.slow_turn_threshold = absl::GetFlag(FLAGS_slow_turn_threshold);
  o.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  o.connection_memory_budget = absl::GetFlag(FLAGS_connection_memory_budget);
  o.silo_memory_budget = absl::GetFlag(FLAGS_silo_memory_budget);
  o.max_mailbox = absl::GetFlag(FLAGS_max_mailbox);
  o.max_pushback_wait = absl::GetFlag(FLAGS_max_pushback_wait);
  o.route_retry_delay = absl::GetFlag(FLAGS_route_retry_delay);
  o.route_timeout = absl::GetFlag(FLAGS_route_timeout);
  o.max_activations = absl::GetFlag(FLAGS_max_activations);
  o.memory_limit = absl::GetFlag(FLAGS_memory_limit);
  o.grpc_memory_bytes = absl::GetFlag(FLAGS_grpc_memory_bytes);
  o.max_streams_per_connection =
      absl::GetFlag(FLAGS_max_streams_per_connection);
  o.max_gateway_streams = absl::GetFlag(FLAGS_max_gateway_streams);
  o.keepalive_time = absl::GetFlag(FLAGS_keepalive_time);
  o.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  o.handshake_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  o.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  o.max_connection_age_grace = absl::GetFlag(FLAGS_max_connection_age_grace);
  o.max_connections = absl::GetFlag(FLAGS_max_connections);
  o.max_connections_per_peer = absl::GetFlag(FLAGS_max_connections_per_peer);
  o.listener_probe_period = absl::GetFlag(FLAGS_listener_probe_period);
  o.storage = absl::GetFlag(FLAGS_storage);
  o.durability = absl::GetFlag(FLAGS_durability);
  o.min_reminder_period = absl::GetFlag(FLAGS_min_reminder_period);
  o.max_reminders_per_grain = absl::GetFlag(FLAGS_max_reminders_per_grain);
  o.max_reminders = absl::GetFlag(FLAGS_max_reminders);
  o.cluster = absl::GetFlag(FLAGS_cluster);
  o.primary = absl::GetFlag(FLAGS_primary);
  o.postgres = absl::GetFlag(FLAGS_postgres);
  o.postgres_file = absl::GetFlag(FLAGS_postgres_file);
  o.cluster_id = absl::GetFlag(FLAGS_cluster_id);
  o.postgres_connections = absl::GetFlag(FLAGS_postgres_connections);
  o.dead_retention = absl::GetFlag(FLAGS_dead_retention);
  o.probe_interval = absl::GetFlag(FLAGS_probe_interval);
  o.probe_timeout = absl::GetFlag(FLAGS_probe_timeout);
  o.missed_probes = absl::GetFlag(FLAGS_missed_probes);
  o.votes_to_kill = absl::GetFlag(FLAGS_votes_to_kill);
  o.join_timeout = absl::GetFlag(FLAGS_join_timeout);
  o.shutdown_timeout = absl::GetFlag(FLAGS_shutdown_timeout);
  o.unsafe_disable_lease_for_testing =
      absl::GetFlag(FLAGS_unsafe_disable_lease_for_testing);
  if (absl::Status s = ValidateSiloHostOptions(o); !s.ok()) return s;
  if (absl::Status s = CheckProviderNames(o, DefaultProviders()); !s.ok()) {
    return s;
  }
  return o;
}

bool CheckConfigRequested() { return absl::GetFlag(FLAGS_check_config); }

std::string EffectiveConfig() {
  std::string out;
  for (const auto& [name, flag] : OwnFlags()) {
    if (name == "config" || name == "check_config") continue;
    std::string value = flag->CurrentValue();
    // A connection string may hold a password; every other secret is read
    // from a file the flag names.
    if (name == "postgres" && !value.empty()) {
      value = storage::RedactConninfo(value);
    }
    absl::StrAppend(&out, "--", name, "=", value, "\n");
  }
  return out;
}

}  // namespace granary::silo
