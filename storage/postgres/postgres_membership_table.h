// File: storage/postgres/postgres_membership_table.h
// -----------------------------------------------------------------------------
// The membership table of a production cluster (--cluster=postgres), in
// PostgreSQL: every silo is equal, and any may die.
//
//   PgPool pool(options);                        // storage/postgres/pg_pool.h
//   PostgresMembershipTable table(&pool, "prod");
//   absl::StatusOr<v1::MembershipView> view = co_await table.Read();
//   co_await table.Write(me, view->version());   // ABORTED when not current
//
// Rows (schema: storage/postgres/migrations/): one per silo generation in
// `granary_members`, keyed by (cluster_id, address, generation), holding
// the whole member with its suspicion votes; the cluster's version in
// `granary_membership_version`. A write is one transaction that advances
// the version only if it is still the expected one (an UPDATE ... WHERE
// version = expected: a second writer blocks on the row and then finds
// the version moved, ABORTED) and then replaces the member's row, as
// Orleans' ADO.NET clustering does. Every write also deletes the cluster's
// Dead rows last changed longer than `dead_retention` ago, so the table
// does not grow with every silo that ever ran.
//
// Every write NOTIFYs kMembershipChannel with the cluster id in its
// transaction. A heartbeat is a transaction of its own that locks the member's
// row (SELECT ... FOR UPDATE), copies only heartbeat_unix_ms, activations and
// the load onto the stored member (INVALID_ARGUMENT for a malformed
// load), and rewrites the row; the version row is not
// touched. The lock orders it with a concurrent write of the same row, so
// a heartbeat never undoes a status change or a suspicion vote.
//
// Threading: thread-safe; tasks resume on the pool's threads.
#pragma once

#include <string>

#include "storage/membership_table.h"
#include "storage/postgres/pg_pool.h"

namespace granary::storage {

// The channel every membership write NOTIFYs, its payload the cluster id:
// silos LISTEN on it and read the table at once (silo/cluster/
// postgres_cluster.h). Heartbeats notify nobody.
inline constexpr char kMembershipChannel[] = "granary_membership";

// The longest --cluster_id, in bytes.
inline constexpr size_t kMaxClusterIdBytes = 128;
// OK, or INVALID_ARGUMENT: a cluster id is 1 to 128 bytes of letters,
// digits, '-', '_' and '.'.
absl::Status ValidateClusterId(const std::string& id);

class PostgresMembershipTable final : public MembershipTable {
 public:
  static constexpr absl::Duration kDefaultDeadRetention = absl::Hours(24);

  // `pool` must outlive the table.
  PostgresMembershipTable(PgPool* pool, std::string cluster_id,
                          absl::Duration dead_retention = kDefaultDeadRetention,
                          VoteRules vote_rules = {})
      : pool_(pool),
        cluster_id_(std::move(cluster_id)),
        dead_retention_(dead_retention),
        vote_rules_(vote_rules) {}

  Task<absl::StatusOr<v1::MembershipView>> Read() override;
  Task<absl::StatusOr<int64_t>> Write(v1::Member member,
                                      int64_t expected_version) override;
  Task<absl::Status> Heartbeat(v1::Member member) override;
  // One row by its key (the lease's renewals).
  Task<absl::StatusOr<v1::Member>> ReadRow(v1::Member member) override;
  static absl::StatusOr<v1::Member> ReadRowOn(PgConnection& db,
                                              const std::string& cluster,
                                              const v1::Member& member);

  // The same on a connection of the caller's (tools and tests).
  static absl::StatusOr<v1::MembershipView> ReadOn(PgConnection& db,
                                                   const std::string& cluster);
  static absl::StatusOr<int64_t> WriteOn(
      PgConnection& db, const std::string& cluster, const v1::Member& member,
      int64_t expected_version,
      absl::Duration dead_retention = kDefaultDeadRetention,
      const VoteRules& vote_rules = {});
  static absl::Status HeartbeatOn(PgConnection& db, const std::string& cluster,
                                  const v1::Member& member);

 private:
  PgPool* const pool_;
  const std::string cluster_id_;
  const absl::Duration dead_retention_;
  const VoteRules vote_rules_;
};

}  // namespace granary::storage
