// File: silo/cluster/postgres_cluster.h
// -----------------------------------------------------------------------------
// The production cluster (`--cluster=postgres`, DESIGN.md "Directory and
// membership"): the membership table, grain state and reminders live in
// PostgreSQL (storage/postgres/), every silo is equal and any may die.
//
//   PostgresClusterOptions o;
//   o.conninfo = "host=db.internal dbname=granary user=granary";
//   o.cluster_id = "prod";
//   GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<ClusterProvider> cluster,
//                            MakePostgresClusterProvider(o));
//
// The provider has a pool of its own (two connections) for the membership
// table, so grain-state traffic never delays a heartbeat, a vote or the
// lease's re-reads. Its watch LISTENs on the table's channel from a
// connection of its own (every write NOTIFYs it) and reads the table as
// soon as a write of its cluster commits; it also reads it every
// `poll_interval`, a safety net that also brings other silos' loads
// (heartbeats notify nobody). It passes on every newer version, and the
// current one again (heartbeats and loads change rows without a new
// version). Reminders are scheduled by
// range: each silo runs the reminders whose grain falls in its range of the
// directory ring (reminders_by_range), and serves granary.v1.Reminders on its
// silo endpoint so that a grain elsewhere can register its reminders with the
// silo that owns them.
//
// Start-up (OpenPostgres): a CONNINFO that does not parse is refused at
// once (INVALID_ARGUMENT); a server that cannot be reached is tried again
// with backoff (100 ms doubling to 2 s) until `wait`, then UNAVAILABLE; a
// login that is refused is UNAUTHENTICATED at once; then the schema must be
// exactly this build's (FAILED_PRECONDITION naming `granary db migrate`).
//
// Threading: as ClusterProvider; the watch runs on the pool's threads and
// the timer queue it is given.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "silo/cluster/cluster_provider.h"
#include "storage/membership_table.h"

namespace granary::silo {

struct PostgresClusterOptions {
  // libpq connection string or URI (never logged whole: RedactConninfo).
  std::string conninfo;
  std::string cluster_id = "default";
  // Dead rows older than this are deleted (storage/postgres/
  // postgres_membership_table.h).
  absl::Duration dead_retention = absl::Hours(24);
  // How long start-up keeps trying to reach the database.
  absl::Duration wait = absl::Seconds(30);
  // How often the watch reads the table: a safety net for missed
  // notifications, and how fresh other silos' loads are (heartbeats notify
  // nobody).
  absl::Duration poll_interval = absl::Seconds(1);
  // How suspicion votes declare a silo dead (every write obeys them).
  storage::VoteRules vote_rules;
};

// Connects to `conninfo` (retrying an unreachable server until `wait`) and
// checks the schema; see above for the statuses.
absl::Status OpenPostgres(const std::string& conninfo, absl::Duration wait);

absl::StatusOr<std::unique_ptr<ClusterProvider>> MakePostgresClusterProvider(
    const PostgresClusterOptions& options);

}  // namespace granary::silo
