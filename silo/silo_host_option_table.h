// File: silo/silo_host_option_table.h
// -----------------------------------------------------------------------------
// Every option of a silo host, declared once, as X(type, name, default, help)
// rows. The table makes:
//   - the SiloHostOptions field `name` and its default
//     (silo/silo_host_options.h);
//   - the granary-silo flag --name, with the same default and the help
//     (silo/silo_flags.cc), which GRANARY_<NAME> and --config set too and
//     --check_config prints;
//   - the copy of the flag into the field (SiloHostOptionsFromFlags).
// The runtime's rows are its own table's (silo/runtime/runtime_option_table.h:
// RuntimeOptions has the same fields and defaults).
// What each option may be is checked by ValidateSiloHostOptions, which
// names the flag; silo_process_test gives every check a bad value.
//
//   #define FIELD(type, name, default_value, help) type name = default_value;
//   GRANARY_SILO_HOST_OPTIONS(FIELD)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "silo/runtime/runtime_option_table.h"

// clang-format off
#define GRANARY_SILO_HOST_OPTIONS(X) \
  /* Listeners and their security */ \
  X(std::string, gateway, "127.0.0.1:30000", \
    "HOST:PORT of the gateway clients connect to (port 0: any free port).") \
  X(std::string, silo, "127.0.0.1:11111", \
    "HOST:PORT of the silo-to-silo endpoint (port 0: any free port).") \
  X(std::string, silo_advertise, "", \
    "HOST:PORT at which the other silos reach this silo's endpoint, when " \
    "not --silo (behind a proxy, NAT or a container's port mapping). " \
    "It names the silo in the membership table.") \
  X(std::string, gateway_advertise, "", \
    "HOST:PORT at which clients reach this silo's gateway, when not " \
    "--gateway. The membership table names it, so it is what clients " \
    "that learn gateways from the cluster dial. Default: --gateway, " \
    "with a wildcard host (0.0.0.0, ::) replaced by the host of " \
    "--silo_advertise.") \
  X(std::string, http, "127.0.0.1:8080", \
    "HOST:PORT of the HTTP endpoint (port 0: any free port).") \
  X(std::string, http_token_file, "", \
    "A file holding a bearer token that every HTTP path but /healthz " \
    "then requires (Authorization: Bearer TOKEN). Needed for --http " \
    "off loopback.") \
  X(int32_t, http_threads, 4, \
    "Worker threads of the HTTP endpoint (1 to 1024): each client holds " \
    "one while it sends its request, so this many slow clients at once " \
    "can hold up /healthz for up to --http_request_timeout.") \
  X(absl::Duration, http_request_timeout, absl::Seconds(2), \
    "An HTTP client that has not sent a whole request after this long " \
    "is dropped (100ms to 1m).") \
  X(int32_t, http_connections_per_peer, 0, \
    "Connections one peer address (an IPv4 address, an IPv6 /64) may " \
    "hold open on the HTTP endpoint at once; more are closed as soon " \
    "as they are accepted (0: a quarter of --http_threads, at least " \
    "2). Slow clients from one address then never hold every worker, " \
    "so a probe from another address is always served.") \
  X(std::string, tls_cert, "", \
    "PEM certificate chain of the gateway: with --tls_key, the gateway " \
    "serves TLS only. Reloaded when the file changes.") \
  X(std::string, tls_key, "", \
    "PEM private key of --tls_cert.") \
  X(std::string, tls_client_ca, "", \
    "With --tls_cert: clients must present a certificate that chains " \
    "to this PEM CA (mutual TLS); its subject is the caller's identity.") \
  X(std::string, auth_tokens, "", \
    "A file of NAME TOKEN lines (# comments): every gateway call but " \
    "health checks then needs metadata authorization: Bearer TOKEN, " \
    "and NAME is the caller's identity. Reloaded when the file " \
    "changes.") \
  X(std::string, cluster_ca, "", \
    "PEM CA of the cluster: with --cluster_tls_cert and " \
    "--cluster_tls_key, the silo-to-silo port and every connection to " \
    "other silos use mutual TLS, and only certificates of this CA are " \
    "accepted there.") \
  X(std::string, cluster_tls_cert, "", \
    "PEM certificate chain this silo presents to other silos (as " \
    "server and as client), issued by --cluster_ca.") \
  X(std::string, cluster_tls_key, "", \
    "PEM private key of --cluster_tls_cert.") \
  X(absl::Duration, tls_reload, absl::Seconds(10), \
    "How often certificate, key and token files are checked for " \
    "changes.") \
  X(bool, allow_plaintext, false, \
    "Allow --gateway or --silo on a non-loopback address without TLS " \
    "(logged as a warning). Anything that reaches a plaintext silo " \
    "port can act as a silo.") \
  X(std::vector<std::string>, http_hosts, {}, \
    "Host names (comma-separated) that requests to --http may name in " \
    "their Host header, besides IP addresses and localhost; a request " \
    "naming another is refused 403, so a DNS-rebinding web page cannot " \
    "read the metrics through a browser.") \
  X(bool, allow_anonymous, false, \
    "Allow --gateway on a non-loopback address with no client " \
    "authentication (neither --auth_tokens nor --tls_client_ca): " \
    "anyone who reaches it may call any grain.") \
  X(bool, allow_insecure_postgres, false, \
    "Allow a PostgreSQL server that is not on this machine without " \
    "sslmode=verify-full in the connection string: the password, grain " \
    "state and membership then cross the network unchecked, and " \
    "whoever answers at that address is taken for the database.") \
  /* The runtime: workers, turns, idle collection, flow control, memory */ \
  X(std::string, data_dir, "./granary-data", \
    "Directory for this silo's data; created if missing.") \
  GRANARY_RUNTIME_OPTIONS(X) \
  X(int32_t, max_message_bytes, 4 << 20, \
    "Largest message the gateway accepts or sends.") \
  X(int32_t, max_in_flight, 16384, \
    "Unfinished calls per client connection past which the gateway " \
    "stops reading it (gRPC flow control then holds the client back).") \
  X(int64_t, connection_memory_budget, int64_t{32} << 20, \
    "Bytes one client connection's unfinished calls and unwritten " \
    "replies may hold (one-way calls count until they ran) before the " \
    "gateway stops reading it. At least --max_message_bytes.") \
  X(int64_t, silo_memory_budget, int64_t{512} << 20, \
    "Bytes all client connections together may hold, counted like " \
    "--connection_memory_budget; past it every client stream pauses " \
    "and the standard gRPC services answer RESOURCE_EXHAUSTED.") \
  /* gRPC servers: limits, keepalive, connection caps */ \
  X(int64_t, grpc_memory_bytes, int64_t{512} << 20, \
    "Memory gRPC may use for connection buffers on each of the silo's " \
    "ports (a gRPC ResourceQuota; at least 16 MiB).") \
  X(int32_t, max_streams_per_connection, 128, \
    "Calls one connection may have open at once on each port (HTTP/2 " \
    "MAX_CONCURRENT_STREAMS); more wait in the client.") \
  X(int32_t, max_gateway_streams, 16384, \
    "Gateway-protocol streams (SDK connections) open at once on the " \
    "client gateway; more are refused with RESOURCE_EXHAUSTED. Each " \
    "costs about 20 KiB.") \
  X(absl::Duration, keepalive_time, absl::Seconds(30), \
    "A connection silent this long is pinged, and closed when the ping " \
    "is not answered within --keepalive_timeout. Clients may ping " \
    "every 10s at most.") \
  X(absl::Duration, keepalive_timeout, absl::Seconds(10), \
    "How long a keepalive ping may go unanswered.") \
  X(absl::Duration, handshake_timeout, absl::Seconds(5), \
    "A new connection to the gateway or silo port that has not " \
    "finished its TLS handshake and sent its HTTP/2 settings within " \
    "this is closed (100ms to 10m).") \
  X(absl::Duration, max_connection_age, absl::Minutes(30), \
    "A connection to the gateway or silo port this old (±10%) is told " \
    "to go; clients move their calls to a new one, where tokens and " \
    "certificates are checked again, so revoking one ends its open " \
    "connections too (1s to 576h).") \
  X(absl::Duration, max_connection_age_grace, absl::Minutes(1), \
    "How long calls on a connection told to go may still finish " \
    "before it is closed (1s to 24h).") \
  X(int32_t, max_connections, 0, \
    "Connections open at once on each gRPC port (gateway, silo); more " \
    "are closed as soon as they are accepted. 0: sized from the " \
    "open-file limit (raised to its hard limit at start): a reserve of " \
    "max(256, limit/8) is kept for files and outgoing connections, " \
    "and each port gets an equal share of the rest.") \
  X(int32_t, max_connections_per_peer, 0, \
    "Of --max_connections, connections one peer address (IPv4 " \
    "address, IPv6 /64) may hold open on each gRPC port. 0: an eighth " \
    "of the port's share, at least 16.") \
  X(absl::Duration, listener_probe_period, absl::Seconds(5), \
    "How often the silo connects to each of its gRPC ports to prove " \
    "it still accepts; one that does not fails /readyz, and after " \
    "three probes in a row /healthz. 0: never.") \
  /* Grain types */ \
  X(std::vector<std::string>, grain_library, {}, \
    "Shared libraries of grain types to host (built against this " \
    "Granary version with granary-dev: docs/sdk.md). Repeat the flag " \
    "or separate paths with commas. A library built against another " \
    "version, or without GRANARY_GRAIN_LIBRARY, is refused at start.") \
  X(std::vector<std::string>, grain_types, {}, \
    "The grain types this silo hosts (full names; repeat the flag or " \
    "separate them with commas). It still knows the other types it " \
    "was built with or loaded, and passes their calls on to silos " \
    "that host them. Empty: all of them.") \
  X(std::string, labels, "", \
    "This silo's labels, key=value pairs separated by commas " \
    "(zone=a,role=billing): a grain type whose placement_filter names " \
    "labels is placed only on silos carrying them all.") \
  /* Storage and reminders */ \
  X(std::string, storage, "", \
    "Where grain state and reminders live: rocksdb (in --data_dir; " \
    "survives restarts and kill -9), memory (lost when the silo stops) " \
    "or postgres (the database of --postgres, shared by the cluster). " \
    "Default: postgres with --cluster=postgres, else rocksdb.") \
  X(std::string, durability, "sync", \
    "RocksDB writes: sync (an acknowledged write survives power loss) " \
    "or async (survives a crash of the process, not of the machine).") \
  /* Membership, PostgreSQL, failure detection, routing, join and stop */ \
  X(std::string, cluster, "local", \
    "local (this silo alone), dev (a cluster on one host: the silo " \
    "without --primary hosts the membership table, the others name its " \
    "--silo endpoint with --primary) or postgres (production: the " \
    "membership table, grain state and reminders in the PostgreSQL " \
    "database of --postgres; every silo equal).") \
  X(std::string, primary, "", \
    "With --cluster=dev: HOST:PORT of the primary's silo endpoint.") \
  X(std::string, postgres, "", \
    "With --cluster=postgres or --storage=postgres: the libpq " \
    "connection string or URI of the database. It may hold a password: " \
    "prefer --postgres_file or the GRANARY_POSTGRES environment " \
    "variable, which are used when this flag is empty. Never logged " \
    "with its password.") \
  X(std::string, postgres_file, "", \
    "A file holding the PostgreSQL connection string (for secrets).") \
  X(std::string, cluster_id, "default", \
    "The cluster's name in the database: clusters with other names " \
    "share it without seeing each other (letters, digits, - _ .).") \
  X(int32_t, postgres_connections, 4, \
    "PostgreSQL connections for grain state and reminders: statements " \
    "in flight at once (the membership table has two of its own).") \
  X(absl::Duration, dead_retention, absl::Hours(24), \
    "Rows of dead silos older than this are deleted from the " \
    "membership table (PostgreSQL's, or a dev cluster primary's), at " \
    "its next write.") \
  X(absl::Duration, probe_interval, absl::Seconds(1), \
    "How often a silo probes the silos after it on the ring.") \
  X(absl::Duration, probe_timeout, absl::Milliseconds(500), \
    "How long a probe may take before it counts as missed.") \
  X(int32_t, missed_probes, 2, \
    "Consecutive missed probes after which a silo votes the other dead.") \
  X(int32_t, votes_to_kill, 2, \
    "Fresh votes that declare a silo dead (fewer when fewer silos are " \
    "alive to vote).") \
  X(absl::Duration, load_report_period, absl::Seconds(1), \
    "How often a silo of a PostgreSQL cluster writes its CPU, memory " \
    "and activation count to its row for RESOURCE_OPTIMIZED placement " \
    "(100ms to 5s; a dev cluster carries them in its 5s heartbeats).") \
  X(absl::Duration, route_retry_delay, absl::Milliseconds(20), \
    "A call whose grain's silo the directory cannot name yet (its " \
    "owner unreachable, the ring changing) is retried after this, " \
    "doubling up to 500ms (1ms to 10s).") \
  X(absl::Duration, route_timeout, absl::Seconds(30), \
    "How long such a call keeps being retried before it fails " \
    "UNAVAILABLE (100ms to 10m).") \
  X(bool, hand_off_on_leave, true, \
    "On a graceful stop (SIGTERM) of a cluster's silo, hand its grains " \
    "to the other silos with their state in memory (live migration) " \
    "instead of deactivating them; those no silo takes deactivate.") \
  X(absl::Duration, join_timeout, absl::Seconds(30), \
    "How long to keep trying to join the cluster (reach the primary, " \
    "or the PostgreSQL server) before giving up.") \
  X(absl::Duration, shutdown_timeout, absl::Seconds(30), \
    "How long a graceful stop (SIGTERM) may take: leaving the cluster, " \
    "grains deactivating (at most a third of it), clients and other " \
    "silos sending their calls elsewhere (which get at least 3 s " \
    "more when the grains took it all). Give a supervisor's kill " \
    "timeout (Kubernetes' terminationGracePeriodSeconds, systemd's " \
    "TimeoutStopSec) at least 5 s more than this.") \
  X(bool, unsafe_disable_lease_for_testing, false, \
    "FOR TESTS ONLY: breaks the cluster's single-activation guarantee. " \
    "This silo runs grain code without a membership lease, so when cut " \
    "off from the table it keeps answering after the others declared " \
    "it dead. Exists to show that the partition tests fail without the " \
    "lease.")
// clang-format on
