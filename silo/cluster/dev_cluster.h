// File: silo/cluster/dev_cluster.h
// -----------------------------------------------------------------------------
// The cluster providers `local` and `dev` (silo/cluster/cluster_provider.h).
//
//   local: a table of one, in this silo's memory; nothing is shared.
//   dev, without a primary: this silo is the primary. It holds the table in
//        memory and serves it (granary.v1.Membership), its grain state
//        (granary.v1.GrainState) and its reminders (granary.v1.Reminders) to
//        the other silos on its silo endpoint.
//   dev, with a primary: the table, grain state and reminders are the
//        primary's, reached over gRPC.
//
//   auto cluster = DevClusterProvider::Make("dev", "127.0.0.1:11111");
//
// A dev cluster stands on its primary: one host, experiments only.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/security.h"
#include "silo/cluster/cluster_provider.h"
#include "storage/membership_table.h"

namespace granary::silo {

class DevClusterProvider;

// `kind` is "local" or "dev"; `primary` the primary's silo endpoint
// (HOST:PORT), empty on the primary and with "local". INVALID_ARGUMENT for
// an unknown kind, a primary with "local" or a primary that is not
// HOST:PORT. `security`: what a silo presents to the primary and trusts in
// it.
absl::StatusOr<std::unique_ptr<ClusterProvider>> MakeDevClusterProvider(
    const std::string& kind, const std::string& primary,
    const rpc::ClientSecurity& security = {},
    const storage::VoteRules& vote_rules = {},
    absl::Duration dead_retention = absl::Hours(24));

}  // namespace granary::silo
