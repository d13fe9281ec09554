// The checks of a silo host's options, and the settings derived from them
// (silo/silo_host_options.h).
#include "silo/silo_host_options.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "core/labels.h"
#include "rpc/credentials.h"
#include "silo/grain_library_loader.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/postgres_membership_table.h"

namespace granary::silo {
namespace {

bool IsHostPort(const std::string& value) {
  std::string host;
  int port = 0;
  return SplitHostPort(value, &host, &port);
}

}  // namespace

std::string EffectiveStorage(const SiloHostOptions& o) {
  if (!o.storage.empty()) return o.storage;
  return o.cluster == "postgres" ? "postgres" : "rocksdb";
}

rpc::ServerSecurity GatewaySecurity(const SiloHostOptions& o) {
  rpc::ServerSecurity s;
  s.cert_file = o.tls_cert;
  s.key_file = o.tls_key;
  s.client_ca_file = o.tls_client_ca;
  s.tokens_file = o.auth_tokens;
  s.reload = o.tls_reload;
  return s;
}

rpc::ServerSecurity ClusterServerSecurity(const SiloHostOptions& o) {
  rpc::ServerSecurity s;
  s.cert_file = o.cluster_tls_cert;
  s.key_file = o.cluster_tls_key;
  s.client_ca_file = o.cluster_ca;
  s.reload = o.tls_reload;
  return s;
}

rpc::ClientSecurity ClusterClientSecurity(const SiloHostOptions& o) {
  rpc::ClientSecurity s;
  s.ca_file = o.cluster_ca;
  s.cert_file = o.cluster_tls_cert;
  s.key_file = o.cluster_tls_key;
  s.check_hostname = true;  // a silo's certificate names its host
  s.reload = o.tls_reload;
  return s;
}

rpc::ServerLimits ServerLimitsOf(const SiloHostOptions& o) {
  rpc::ServerLimits limits;
  limits.max_message_bytes = o.max_message_bytes;
  limits.memory_bytes = o.grpc_memory_bytes;
  limits.max_streams_per_connection = o.max_streams_per_connection;
  limits.keepalive_time = o.keepalive_time;
  limits.keepalive_timeout = o.keepalive_timeout;
  limits.handshake_timeout = o.handshake_timeout;
  limits.max_connection_age = o.max_connection_age;
  limits.max_connection_age_grace = o.max_connection_age_grace;
  return limits;
}

absl::Status ValidateSiloHostOptions(const SiloHostOptions& o) {
  const absl::Duration slow_turn = o.slow_turn_threshold;
  if (slow_turn <= absl::ZeroDuration() ||
      slow_turn == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "--slow_turn_threshold must be positive and finite");
  }
  if (o.workers < 0) {
    return absl::InvalidArgumentError("--workers must not be negative");
  }
  if (o.turn_budget < 1) {
    return absl::InvalidArgumentError("--turn_budget must be at least 1");
  }
  if (o.max_message_bytes < kMinMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_bytes must be at least ", kMinMessageBytes,
                     " (4 KiB), not ", o.max_message_bytes));
  }
  if (o.max_in_flight < 1) {
    return absl::InvalidArgumentError("--max_in_flight must be positive");
  }
  if (o.connection_memory_budget < o.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--connection_memory_budget (", o.connection_memory_budget,
        ") must be at least --max_message_bytes (", o.max_message_bytes, ")"));
  }
  if (o.silo_memory_budget < o.connection_memory_budget) {
    return absl::InvalidArgumentError(
        absl::StrCat("--silo_memory_budget (", o.silo_memory_budget,
                     ") must be at least --connection_memory_budget (",
                     o.connection_memory_budget, ")"));
  }
  if (o.http_threads < 1 || o.http_threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_threads must be from 1 to 1024, not ", o.http_threads));
  }
  if (o.http_connections_per_peer < 0 ||
      o.http_connections_per_peer > 1 << 20) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_connections_per_peer must be from 0 (a quarter of "
                     "--http_threads) to 1048576, not ",
                     o.http_connections_per_peer));
  }
  if (o.http_request_timeout < absl::Milliseconds(100) ||
      o.http_request_timeout > absl::Minutes(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_request_timeout must be from 100ms to 1m, not ",
                     absl::FormatDuration(o.http_request_timeout)));
  }
  if (o.max_gateway_streams < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_gateway_streams must be positive, not ", o.max_gateway_streams));
  }
  if (o.max_activations < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_activations must be positive, not ", o.max_activations));
  }
  if (o.memory_limit != 0 && o.memory_limit < (int64_t{64} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory_limit must be 0 (none) or at least 64 MiB (67108864), not ",
        o.memory_limit));
  }
  if (o.max_mailbox < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_mailbox must be positive, not ", o.max_mailbox));
  }
  GRANARY_RETURN_IF_ERROR(rpc::ValidateServerLimits(ServerLimitsOf(o)));
  if (o.max_connections < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_connections must be 0 (sized from the open-file limit) or "
        "positive, not ",
        o.max_connections));
  }
  if (o.max_connections_per_peer < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_connections_per_peer must be 0 (sized from the open-file "
        "limit) or positive, not ",
        o.max_connections_per_peer));
  }
  if (o.listener_probe_period < absl::ZeroDuration() ||
      (o.listener_probe_period > absl::ZeroDuration() &&
       o.listener_probe_period < absl::Milliseconds(100)) ||
      o.listener_probe_period > absl::Hours(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listener_probe_period must be 0 (never) or from 100ms to 1h, not ",
        absl::FormatDuration(o.listener_probe_period)));
  }
  if (o.min_reminder_period < absl::Milliseconds(1) ||
      o.min_reminder_period == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "--min_reminder_period must be at least 1ms and finite");
  }
  for (const std::string& name : o.http_hosts) {
    const bool plain =
        !name.empty() && name.size() <= 253 &&
        name.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
            "0123456789.-") == std::string::npos;
    if (!plain) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--http_hosts: '", absl::CHexEscape(name.substr(0, 64)),
          "' is not a host name (letters, digits, dots and dashes)"));
    }
  }
  // Read, not loaded: --check_config runs no library's code.
  if (absl::StatusOr<Labels> labels = ParseLabels(o.labels); !labels.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--labels: ", labels.status().message()));
  }
  for (const std::string& type : o.grain_types) {
    if (type.empty() || type.size() > 256) {
      return absl::InvalidArgumentError(
          "--grain_types: a type name is empty or over 256 bytes");
    }
  }
  for (const std::string& path : o.grain_library) {
    if (path.empty()) {
      return absl::InvalidArgumentError("--grain_library: an empty path");
    }
  }
  // One library twice would add its grain types twice (and define its
  // protos twice, which Protobuf does not survive): refused here.
  absl::flat_hash_set<std::string> libraries;
  for (const std::string& path : o.grain_library) {
    GRANARY_RETURN_IF_ERROR(CheckGrainLibrary(path));
    char* real = realpath(path.c_str(), nullptr);
    const std::string key = real != nullptr ? real : path;
    std::free(real);
    if (!libraries.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--grain_library names ", path, " twice (as ", key, ")"));
    }
  }
  if (o.max_reminders_per_grain < 1 || o.max_reminders < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_reminders_per_grain and --max_reminders must be positive, not ",
        o.max_reminders_per_grain, " and ", o.max_reminders));
  }
  for (const auto& [name, value] :
       {std::pair{"--gateway", &o.gateway}, std::pair{"--silo", &o.silo},
        std::pair{"--http", &o.http}}) {
    // An empty --gateway or --http: the silo serves no such endpoint.
    if (value->empty() && value != &o.silo) continue;
    if (!IsHostPort(*value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "='", *value, "' is not HOST:PORT"));
    }
  }
  if (o.idle_spin < 0 || o.idle_spin > 1'000'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--idle_spin must be from 0 to 1000000, not ", o.idle_spin));
  }
  if (o.idle_timeout <= absl::ZeroDuration() ||
      o.collection_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--idle_timeout and --collection_period must be "
                     "positive, not ",
                     absl::FormatDuration(o.idle_timeout), " and ",
                     absl::FormatDuration(o.collection_period)));
  }
  if (o.max_pushback_wait < absl::ZeroDuration() ||
      o.max_pushback_wait > absl::Minutes(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_pushback_wait must be from 0 to 10m, not ",
                     absl::FormatDuration(o.max_pushback_wait)));
  }
  std::string host;
  int port = 0;
  SplitHostPort(o.http, &host, &port);
  if (!o.http.empty() && !IsLoopbackHost(host) && o.http_token_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http='", o.http,
        "' is not a loopback address; the endpoint serves metrics and the "
        "dashboard, so off loopback it needs --http_token_file"));
  }
  if (!o.http_token_file.empty()) {
    absl::StatusOr<std::string> token = rpc::ReadTokenFile(o.http_token_file);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--http_token_file: ", token.status().message()));
    }
  }
  GRANARY_RETURN_IF_ERROR(
      rpc::ValidateServerSecurity(GatewaySecurity(o), "--tls_cert"));
  if (!o.auth_tokens.empty()) {
    if (absl::StatusOr<rpc::TokenTable> table =
            rpc::ReadTokenTable(o.auth_tokens);
        !table.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth_tokens: ", table.status().message()));
    }
  }
  const int cluster_files = !o.cluster_ca.empty() +
                            !o.cluster_tls_cert.empty() +
                            !o.cluster_tls_key.empty();
  if (cluster_files != 0 && cluster_files != 3) {
    return absl::InvalidArgumentError(
        "--cluster_ca, --cluster_tls_cert and --cluster_tls_key go together "
        "(mutual TLS between silos needs all three)");
  }
  if (cluster_files == 3) {
    GRANARY_RETURN_IF_ERROR(rpc::ValidateServerSecurity(
        ClusterServerSecurity(o), "--cluster_tls_cert"));
    // The other silos accept only certificates of the cluster CA.
    if (absl::Status chained =
            rpc::CertificateChainsTo(o.cluster_tls_cert, o.cluster_ca);
        !chained.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cluster_tls_cert: ", chained.message(),
                       " (--cluster_ca); the other silos would refuse it"));
    }
    // The other silos check that this silo's certificate names the host
    // they dial, and let it act for the hosts it names only.
    const std::string& advertised =
        o.silo_advertise.empty() ? o.silo : o.silo_advertise;
    if (SplitHostPort(advertised, &host, &port)) {
      host = rpc::CanonicalHost(host);
      if (host == "0.0.0.0" || host == "::") {
        return absl::InvalidArgumentError(absl::StrCat(
            "--silo='", o.silo,
            "' listens on every address: name the one the other silos "
            "reach, which its certificate names, with --silo_advertise"));
      }
      if (absl::Status named = rpc::CertificateNames(o.cluster_tls_cert, host);
          !named.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--cluster_tls_cert: ", named.message(), " of ",
            o.silo_advertise.empty() ? "--silo" : "--silo_advertise",
            "; the other silos check it, so issue this silo a certificate "
            "for its own host"));
      }
    }
  }
  if ((!o.auth_tokens.empty() || !o.tls_client_ca.empty()) &&
      cluster_files == 0 && o.cluster != "local") {
    return absl::InvalidArgumentError(
        "--auth_tokens and --tls_client_ca authenticate the gateway's "
        "clients, but a cluster's silo port (--silo) takes grain calls too, "
        "from silos and with the caller's identity: authenticate the silos "
        "as well (--cluster_ca, --cluster_tls_cert, --cluster_tls_key)");
  }
  const std::string storage = EffectiveStorage(o);
  if (o.durability != "sync" && o.durability != "async") {
    return absl::InvalidArgumentError("--durability must be sync or async");
  }
  if (o.cluster == "postgres" &&
      (storage == "rocksdb" || storage == "memory")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--storage=", storage,
        " keeps grain state and reminders on this "
        "silo alone, where the other silos of a --cluster=postgres cluster "
        "cannot reach them (and where they die with it); use "
        "--storage=postgres, the default with --cluster=postgres"));
  }
  if (o.cluster == "postgres" && !o.primary.empty()) {
    return absl::InvalidArgumentError(
        "--primary is for --cluster=dev; a --cluster=postgres cluster has no "
        "primary");
  }
  // The dev cluster's primary keeps Dead rows as long as PostgreSQL does.
  if (o.dead_retention < absl::Minutes(1) ||
      o.dead_retention == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "--dead_retention must be at least 1m and finite");
  }
  if (o.cluster == "postgres" || storage == "postgres") {
    absl::StatusOr<std::string> conninfo =
        storage::ResolveConninfo(o.postgres, o.postgres_file);
    if (!conninfo.ok()) return conninfo.status();
    GRANARY_RETURN_IF_ERROR(
        storage::CheckConninfoTransport(*conninfo, o.allow_insecure_postgres));
    GRANARY_RETURN_IF_ERROR(storage::ValidateClusterId(o.cluster_id));
    if (o.postgres_connections < 1 || o.postgres_connections > 256) {
      return absl::InvalidArgumentError(
          "--postgres_connections must be in [1, 256]");
    }
  } else if (!o.postgres.empty() || !o.postgres_file.empty()) {
    return absl::InvalidArgumentError(
        "--postgres and --postgres_file need --cluster=postgres or "
        "--storage=postgres");
  }
  if (o.cluster == "local" && !o.primary.empty()) {
    return absl::InvalidArgumentError("--primary needs --cluster=dev");
  }
  if (!o.primary.empty() && !IsHostPort(o.primary)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--primary='", o.primary, "' is not HOST:PORT"));
  }
  if (!o.silo_advertise.empty() &&
      (!SplitHostPort(o.silo_advertise, &host, &port) || port == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--silo_advertise='", o.silo_advertise,
                     "' is not HOST:PORT with a port from 1 to 65535"));
  }
  if (!o.gateway_advertise.empty() &&
      (!SplitHostPort(o.gateway_advertise, &host, &port) || port == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gateway_advertise='", o.gateway_advertise,
                     "' is not HOST:PORT with a port from 1 to 65535"));
  }
  if (o.route_retry_delay < absl::Milliseconds(1) ||
      o.route_retry_delay > absl::Seconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--route_retry_delay must be from 1ms to 10s, not ",
                     absl::FormatDuration(o.route_retry_delay)));
  }
  if (o.load_report_period < absl::Milliseconds(100) ||
      o.load_report_period > absl::Seconds(5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--load_report_period must be from 100ms to 5s, not ",
                     absl::FormatDuration(o.load_report_period)));
  }
  if (o.route_timeout < absl::Milliseconds(100) ||
      o.route_timeout > absl::Minutes(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--route_timeout must be from 100ms to 10m, not ",
                     absl::FormatDuration(o.route_timeout)));
  }
  if (o.join_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--join_timeout must be positive");
  }
  if (o.shutdown_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--shutdown_timeout must be positive");
  }
  // Off loopback every port speaks TLS, unless told otherwise.
  SplitHostPort(o.gateway, &host, &port);
  const bool gateway_remote = !o.gateway.empty() && !IsLoopbackHost(host);
  if (gateway_remote && o.tls_cert.empty() && !o.allow_plaintext) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gateway='", o.gateway,
        "' is not a loopback address: serve TLS there (--tls_cert, "
        "--tls_key) or pass --allow_plaintext"));
  }
  if (!o.gateway.empty() && !gateway_remote && o.tls_cert.empty() &&
      !o.auth_tokens.empty() && rpc::CanonicalHost(host) != "127.0.0.1" &&
      rpc::CanonicalHost(host) != "::1" &&
      rpc::CanonicalHost(host) != "localhost") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth_tokens without TLS serves a gateway on 127.0.0.1, ::1 or "
        "localhost only, not --gateway='",
        o.gateway, "': add --tls_cert and --tls_key"));
  }
  if (gateway_remote && o.auth_tokens.empty() && o.tls_client_ca.empty() &&
      !o.allow_anonymous) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gateway='", o.gateway,
        "' is not a loopback address and authenticates no client: give "
        "--auth_tokens or --tls_client_ca, or pass --allow_anonymous to let "
        "anyone who reaches it call any grain"));
  }
  if (gateway_remote && o.tls_cert.empty() && !o.auth_tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth_tokens on --gateway='", o.gateway,
        "' without TLS would send the tokens across the network in the "
        "clear: add --tls_cert and --tls_key"));
  }
  for (const auto& [flag, value] :
       {std::pair{"--silo", &o.silo},
        std::pair{"--silo_advertise", &o.silo_advertise},
        std::pair{"--primary", &o.primary}}) {
    if (value->empty() || !SplitHostPort(*value, &host, &port) ||
        IsLoopbackHost(host) || cluster_files != 0 || o.allow_plaintext) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "='", *value,
        "' is not a loopback address: silos off loopback use mutual TLS "
        "(--cluster_ca, --cluster_tls_cert, --cluster_tls_key) or need "
        "--allow_plaintext, since anything that reaches a plaintext silo "
        "port can act as a silo"));
  }
  return absl::OkStatus();
}

std::string AdvertisedGateway(const SiloHostOptions& o,
                              const std::string& bound) {
  if (!o.gateway_advertise.empty()) return o.gateway_advertise;
  std::string host;
  int port = 0;
  std::string advertised_host;
  int unused = 0;
  if (SplitHostPort(bound, &host, &port) &&
      (host == "0.0.0.0" || host == "::" || host == "[::]") &&
      SplitHostPort(o.silo_advertise, &advertised_host, &unused)) {
    return absl::StrCat(advertised_host, ":", port);
  }
  return bound;
}

}  // namespace granary::silo
