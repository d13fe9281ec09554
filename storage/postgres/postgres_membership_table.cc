#include "storage/postgres/postgres_membership_table.h"

#include <functional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace granary::storage {

absl::Status ValidateClusterId(const std::string& id) {
  if (id.empty() || id.size() > kMaxClusterIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--cluster_id must be 1 to ",
                                                   kMaxClusterIdBytes,
                                                   " bytes, not ", id.size()));
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' &&
        c != '_' && c != '.') {
      return absl::InvalidArgumentError(
          "--cluster_id may hold only letters, digits, '-', '_' and '.'");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::MembershipView> PostgresMembershipTable::ReadOn(
    PgConnection& db, const std::string& cluster) {
  return InTransaction<v1::MembershipView>(
      db,
      [&]() -> absl::StatusOr<v1::MembershipView> {
        v1::MembershipView view;
        GRANARY_ASSIGN_OR_RETURN(
            PgResult version,
            db.Exec("SELECT version FROM granary_membership_version "
                    "WHERE cluster_id = $1",
                    {cluster}));
        view.set_version(version.rows() == 1 ? version.Int64(0, 0) : 0);
        GRANARY_ASSIGN_OR_RETURN(
            PgResult rows,
            db.Exec("SELECT member FROM granary_members WHERE cluster_id = $1 "
                    "ORDER BY address, generation",
                    {cluster}));
        for (int i = 0; i < rows.rows(); ++i) {
          if (!view.add_members()->ParseFromString(rows.Bytes(i, 0))) {
            return absl::DataLossError(
                absl::StrCat("membership table of cluster '", cluster,
                             "': a member row does not decode"));
          }
        }
        return view;
      },
      "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
}

absl::StatusOr<int64_t> PostgresMembershipTable::WriteOn(
    PgConnection& db, const std::string& cluster, const v1::Member& member,
    int64_t expected_version, absl::Duration dead_retention,
    const VoteRules& vote_rules) {
  const std::string generation = absl::StrCat(member.generation());
  return InTransaction<int64_t>(db, [&]() -> absl::StatusOr<int64_t> {
    if (expected_version == 0) {  // the cluster's first write, perhaps
      GRANARY_RETURN_IF_ERROR(
          db.Exec("INSERT INTO granary_membership_version (cluster_id, "
                  "version) VALUES ($1, 0) ON CONFLICT (cluster_id) DO NOTHING",
                  {cluster})
              .status());
    }
    GRANARY_ASSIGN_OR_RETURN(
        PgResult advanced,
        db.Exec("UPDATE granary_membership_version SET version = version + 1 "
                "WHERE cluster_id = $1 AND version = $2 RETURNING version",
                {cluster, absl::StrCat(expected_version)}));
    if (advanced.rows() != 1) {
      return absl::AbortedError(absl::StrCat("membership table of cluster '",
                                             cluster, "' is not at version ",
                                             expected_version));
    }
    GRANARY_ASSIGN_OR_RETURN(
        PgResult previous,
        db.Exec("SELECT member FROM granary_members WHERE cluster_id = $1 "
                "AND address = $2 AND generation = $3",
                {cluster, member.address(), generation}));
    v1::Member before;
    if (previous.rows() == 1 && !before.ParseFromString(previous.Bytes(0, 0))) {
      return absl::DataLossError("a member row does not decode");
    }
    GRANARY_RETURN_IF_ERROR(
        ValidateMember(member, previous.rows() == 1 ? &before : nullptr));
    v1::Member stored = member;
    NormalizeMember(stored);
    {
      // The view's size and the rows of this host, as CheckViewRoom counts
      // them, from the rows themselves.
      GRANARY_ASSIGN_OR_RETURN(
          PgResult rows,
          db.Exec("SELECT member FROM granary_members WHERE cluster_id = $1",
                  {cluster}));
      v1::MembershipView view;
      for (int i = 0; i < rows.rows(); ++i) {
        if (!view.add_members()->ParseFromString(rows.Bytes(i, 0))) {
          return absl::DataLossError("a member row does not decode");
        }
      }
      GRANARY_RETURN_IF_ERROR(CheckViewRoom(
          view, stored, previous.rows() == 1 ? &before : nullptr));
      // The votes, by the writing silo's clock (as the agent cast them).
      Clock* clock =
          vote_rules.clock != nullptr ? vote_rules.clock : Clock::System();
      GRANARY_RETURN_IF_ERROR(
          CheckVotes(view, member, previous.rows() == 1 ? &before : nullptr,
                     vote_rules, absl::ToUnixMillis(clock->Now())));
    }
    if (previous.rows() == 0) {
      GRANARY_ASSIGN_OR_RETURN(
          PgResult live,
          db.Exec("SELECT count(*) FROM granary_members WHERE cluster_id = $1 "
                  "AND status <> $2",
                  {cluster, absl::StrCat(static_cast<int>(v1::MEMBER_DEAD))}));
      if (live.Int64(0, 0) >= kMaxMembers) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "membership table holds ", kMaxMembers, " live members"));
      }
    }
    GRANARY_RETURN_IF_ERROR(
        db.Exec("INSERT INTO granary_members "
                "(cluster_id, address, generation, status, member) "
                "VALUES ($1, $2, $3, $4, $5) "
                "ON CONFLICT (cluster_id, address, generation) DO UPDATE SET "
                "status = EXCLUDED.status, member = EXCLUDED.member, "
                "updated_at = now()",
                {cluster, member.address(), generation,
                 absl::StrCat(static_cast<int>(stored.status())),
                 PgParam::Bytes(stored.SerializeAsString())})
            .status());
    // Clean-up rides the change it follows (the version already moved).
    GRANARY_RETURN_IF_ERROR(
        db.Exec("DELETE FROM granary_members WHERE cluster_id = $1 "
                "AND status = $2 "
                "AND updated_at < now() - $3 * interval '1 millisecond'",
                {cluster, absl::StrCat(static_cast<int>(v1::MEMBER_DEAD)),
                 absl::StrCat(absl::ToInt64Milliseconds(dead_retention))})
            .status());
    // Delivered to the listening silos when (and only if) this commits.
    GRANARY_RETURN_IF_ERROR(db.Exec(absl::StrCat("SELECT pg_notify('",
                                                 kMembershipChannel, "', $1)"),
                                    {cluster})
                                .status());
    return advanced.Int64(0, 0);
  });
}

absl::Status PostgresMembershipTable::HeartbeatOn(PgConnection& db,
                                                  const std::string& cluster,
                                                  const v1::Member& member) {
  const std::string generation = absl::StrCat(member.generation());
  // InTransaction needs a value: `true` stands for done.
  absl::StatusOr<bool> done =
      InTransaction<bool>(db, [&]() -> absl::StatusOr<bool> {
        // The row lock orders the heartbeat with a write of the same row: it
        // reads the row as that write left it.
        GRANARY_ASSIGN_OR_RETURN(
            PgResult current,
            db.Exec("SELECT member FROM granary_members WHERE cluster_id = $1 "
                    "AND address = $2 AND generation = $3 FOR UPDATE",
                    {cluster, member.address(), generation}));
        if (current.rows() != 1) {
          return absl::NotFoundError(
              absl::StrCat("membership table of cluster '", cluster,
                           "' has no row for ", MemberId(member)));
        }
        v1::Member stored;
        if (!stored.ParseFromString(current.Bytes(0, 0))) {
          return absl::DataLossError(absl::StrCat(
              "the member row of ", MemberId(member), " does not decode"));
        }
        if (!IsLive(stored)) {
          return absl::NotFoundError(absl::StrCat(
              "the member row of ", MemberId(member), " is ",
              v1::MemberStatus_Name(stored.status()), ", not live"));
        }
        GRANARY_RETURN_IF_ERROR(ValidateLoad(member.load()));
        stored.set_heartbeat_unix_ms(member.heartbeat_unix_ms());
        stored.set_activations(member.activations());
        *stored.mutable_load() = member.load();
        GRANARY_RETURN_IF_ERROR(
            db.Exec(
                  "UPDATE granary_members SET member = $4, updated_at = now() "
                  "WHERE cluster_id = $1 AND address = $2 AND generation = $3",
                  {cluster, member.address(), generation,
                   PgParam::Bytes(stored.SerializeAsString())})
                .status());
        return true;
      });
  return done.status();
}

// The jobs are named locals, not temporaries of the co_await expression
// (the GCC 12 hazard in core/task.h: as a temporary, Read crashes).
Task<absl::StatusOr<v1::MembershipView>> PostgresMembershipTable::Read() {
  std::function<absl::StatusOr<v1::MembershipView>(PgConnection&)> job =
      [cluster = cluster_id_](PgConnection& db) { return ReadOn(db, cluster); };
  co_return co_await pool_->Run<v1::MembershipView>(std::move(job));
}

Task<absl::StatusOr<int64_t>> PostgresMembershipTable::Write(
    v1::Member member, int64_t expected_version) {
  std::function<absl::StatusOr<int64_t>(PgConnection&)> job =
      [cluster = cluster_id_, member = std::move(member), expected_version,
       retention = dead_retention_, rules = vote_rules_](PgConnection& db) {
        return WriteOn(db, cluster, member, expected_version, retention, rules);
      };
  co_return co_await pool_->Run<int64_t>(std::move(job));
}

absl::StatusOr<v1::Member> PostgresMembershipTable::ReadRowOn(
    PgConnection& db, const std::string& cluster, const v1::Member& member) {
  GRANARY_ASSIGN_OR_RETURN(
      PgResult row,
      db.Exec("SELECT member FROM granary_members WHERE cluster_id = $1 "
              "AND address = $2 AND generation = $3",
              {cluster, member.address(), absl::StrCat(member.generation())}));
  if (row.rows() != 1) {
    return absl::NotFoundError(absl::StrCat("membership table of cluster '",
                                            cluster, "' has no row for ",
                                            MemberId(member)));
  }
  v1::Member stored;
  if (!stored.ParseFromString(row.Bytes(0, 0))) {
    return absl::DataLossError(absl::StrCat(
        "the member row of ", MemberId(member), " does not decode"));
  }
  return stored;
}

Task<absl::StatusOr<v1::Member>> PostgresMembershipTable::ReadRow(
    v1::Member member) {
  std::function<absl::StatusOr<v1::Member>(PgConnection&)> job =
      [cluster = cluster_id_, member = std::move(member)](PgConnection& db) {
        return ReadRowOn(db, cluster, member);
      };
  co_return co_await pool_->Run<v1::Member>(std::move(job));
}

Task<absl::Status> PostgresMembershipTable::Heartbeat(v1::Member member) {
  // Run needs a value: `true` stands for done.
  std::function<absl::StatusOr<bool>(PgConnection&)> job =
      [cluster = cluster_id_,
       member = std::move(member)](PgConnection& db) -> absl::StatusOr<bool> {
    GRANARY_RETURN_IF_ERROR(HeartbeatOn(db, cluster, member));
    return true;
  };
  absl::StatusOr<bool> done = co_await pool_->Run<bool>(std::move(job));
  co_return done.status();
}

}  // namespace granary::storage
