// File: silo/silo_host_options.h
// -----------------------------------------------------------------------------
// Everything a silo host (silo/silo_host.h) is configured with: one field per
// `granary-silo` flag, both made from one table
// (silo/silo_host_option_table.h), where each option's help documents it. What
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
#include "silo/silo_host_option_table.h"

namespace granary::silo {

// The storage provider `options` names: `storage`, or its default for the
// cluster provider.
struct SiloHostOptions;
std::string EffectiveStorage(const SiloHostOptions& options);

struct SiloHostOptions {
  // One field per row of silo/silo_host_option_table.h (the flag of the same
  // name documents it).
#define GRANARY_SILO_HOST_FIELD(type, name, default_value, help) \
  type name = default_value;
  GRANARY_SILO_HOST_OPTIONS(GRANARY_SILO_HOST_FIELD)
#undef GRANARY_SILO_HOST_FIELD

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
