// File: storage/membership_table.h
// -----------------------------------------------------------------------------
// The versioned membership table (DESIGN.md): one row per silo generation
// and a table version. Every change is a compare-and-swap on that version,
// so every silo sees the same ordered sequence of views.
//
//   absl::StatusOr<v1::MembershipView> view = co_await table.Read();
//   absl::StatusOr<int64_t> version = co_await table.Write(me,
//   view->version());
//   // ABORTED: someone else wrote first; read again and retry
//
// Providers: InMemoryMembershipTable (a single silo, and the primary of a
// `dev` cluster, which serves it to the others over gRPC) and the gRPC
// client of that service (silo/cluster/membership_service.h), and
// PostgresMembershipTable (storage/postgres/, --cluster=postgres).
//
// Threading: every method is thread-safe. An awaiting coroutine resumes
// inline or on a thread of the provider's, and must not block there.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/member.h"
#include "core/sync.h"
#include "core/task.h"
#include "granary/v1/cluster.pb.h"

namespace granary::storage {

class MembershipTable {
 public:
  virtual ~MembershipTable() = default;
  virtual Task<absl::StatusOr<v1::MembershipView>> Read() = 0;
  // The row of `member` (by address and generation) as the table holds it
  // now; NOT_FOUND when there is none. The membership lease renews on it:
  // a read of one row where a table can (PostgreSQL), the whole view
  // otherwise.
  virtual Task<absl::StatusOr<v1::Member>> ReadRow(v1::Member member);
  // Writes `member` (replacing the row of the same address and generation)
  // if the table is at `expected_version`: the new version, ABORTED when it
  // is not, INVALID_ARGUMENT for a malformed row or a backwards status.
  virtual Task<absl::StatusOr<int64_t>> Write(v1::Member member,
                                              int64_t expected_version) = 0;
  // Records the heartbeat of `member` (its heartbeat_unix_ms, load and
  // activations) in its row without advancing the table version, so that
  // heartbeats do not make every silo re-read and re-ring the view. Only a
  // live row changes (a Dead one stays Dead); NOT_FOUND when the row is
  // not there or not live. Providers without such a write answer
  // UNIMPLEMENTED, and the agent writes the heartbeat through Write.
  virtual Task<absl::Status> Heartbeat(v1::Member /*member*/) {
    co_return absl::UnimplementedError(
        "this membership table has no heartbeat write");
  }
};

// Limits that keep a view small enough for every silo to read (a Dead row
// is dropped to make room for a new member). No member can push the view
// past the gRPC message limit (4 MiB) that Read and Watch answer within:
// a row holds at most kMaxMemberBytes, the whole view at most
// kMaxViewBytes, and a write past either is refused.
inline constexpr size_t kMaxAddressBytes = 256;
// Grain types one member may list.
inline constexpr int kMaxGrainTypes = 1024;
inline constexpr int kMaxMembers = 1000;
inline constexpr size_t kMaxMemberBytes = 64 << 10;
inline constexpr size_t kMaxViewBytes = 2 << 20;
// Rows not Dead with one host in their address (a host may run many silos:
// 100 on one machine fit).
inline constexpr int kMaxLiveRowsPerHost = 128;

// OK, or INVALID_ARGUMENT saying what is wrong with `m` as a new version of
// `previous` (nullptr: a new row): its grain types are set when the row is
// added and change no more, except that a Dead row lists none.
absl::Status ValidateMember(const v1::Member& m, const v1::Member* previous);

// OK, or INVALID_ARGUMENT: a CPU figure over 1000 permille or a negative
// memory figure (ValidateMember checks a row's; a heartbeat's load too).
absl::Status ValidateLoad(const v1::SiloLoad& load);

// What the table stores for `m`: a Dead row drops its grain types, labels
// and load (no live silo hosts them there, and the view stays small).
void NormalizeMember(v1::Member& m);

// OK when `view` may take `next` in place of `previous` (nullptr: a new
// row): RESOURCE_EXHAUSTED when the view would grow past kMaxViewBytes, or
// the host of a new row already has kMaxLiveRowsPerHost rows not Dead.
absl::Status CheckViewRoom(const v1::MembershipView& view,
                           const v1::Member& next, const v1::Member* previous);

// How suspicion votes declare a silo dead. Both tables apply these rules to
// every write, and MembershipAgent votes by them (MembershipOptions holds
// the same values), so no single member can declare another dead.
struct VoteRules {
  int votes_to_kill = 2;
  // A vote counts while younger than this.
  absl::Duration vote_expiry = absl::Seconds(30);
  // A live member whose last heartbeat is older than this does not count
  // as a possible voter (so a silo whose peers went silent can still
  // declare them dead), and a new row's votes are checked against it.
  absl::Duration heartbeat_stale = absl::Seconds(15);
  // The table's time; nullptr: the system clock.
  Clock* clock = nullptr;
};
// How far past the table's time a vote may be dated (clocks of silos
// differ a little); a vote dated later is refused.
inline constexpr absl::Duration kMaxVoteSkew = absl::Seconds(5);

// Whether `vote` on `target` counts at `now_ms`: younger than vote_expiry,
// not dated past now + kMaxVoteSkew, cast by a live member of `view` with
// another address than the target's.
bool VoteCounts(const v1::MembershipView& view, const v1::Member& target,
                const v1::Suspicion& vote, const VoteRules& rules,
                int64_t now_ms);
// The votes on `target` that count, one per voter address.
int CountVotes(const v1::MembershipView& view, const v1::Member& target,
               const VoteRules& rules, int64_t now_ms);
// How many counted votes declare `target` dead: votes_to_kill, but no more
// than the live members other than the target whose heartbeat is fresh,
// and at least one. A member that still writes heartbeats always counts,
// so no member's suspicion can shrink this number.
int VotesNeeded(const v1::MembershipView& view, const v1::Member& target,
                const VoteRules& rules, int64_t now_ms);
// OK when the votes of `next`, replacing `previous` (nullptr: a new row)
// in `view`, keep the rules; FAILED_PRECONDITION saying which they break:
//   - a new row carries no votes;
//   - a vote added must count (VoteCounts), and one voter address votes
//     once;
//   - a vote that still counts stays until it expires, or until another
//     vote from its voter's address takes its place;
//   - a write that declares the row Dead and adds a vote (another silo's
//     verdict, not the silo's own leave) carries VotesNeeded counted votes.
absl::Status CheckVotes(const v1::MembershipView& view, const v1::Member& next,
                        const v1::Member* previous, const VoteRules& rules,
                        int64_t now_ms);

// Silos' names and liveness (core/member.h), as the stores' users know them.
using granary::IsLive;
using granary::MemberId;

class InMemoryMembershipTable final : public MembershipTable {
 public:
  // Dead rows are dropped by the first write `dead_retention` after they
  // went Dead (or sooner, oldest first, to make room).
  explicit InMemoryMembershipTable(
      VoteRules rules = {}, absl::Duration dead_retention = absl::Hours(24));

  Task<absl::StatusOr<v1::MembershipView>> Read() override;
  Task<absl::StatusOr<int64_t>> Write(v1::Member member,
                                      int64_t expected_version) override;
  // Write, done before it returns (the table's service answers with it).
  absl::StatusOr<int64_t> WriteNow(v1::Member member, int64_t expected_version);

  // Calls `fn` with the view after every change; returns an id for
  // Unsubscribe, which waits for a call in progress. Concurrent writes may
  // deliver an older view after a newer one: subscribers skip versions they
  // have passed. `fn` must not call back into the table.
  int Subscribe(std::function<void(const v1::MembershipView&)> fn);
  void Unsubscribe(int id);
  v1::MembershipView Snapshot() const;

 private:
  // True when the view has room for `member` in place of `row`, once Dead
  // rows are purged as needed (`row` then points to the row anew, and
  // `*purged` is set).
  bool RoomFor(const v1::Member& member, v1::Member*& row, bool* purged)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the oldest Dead row; false when there is none.
  bool PurgeOldestDead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the rows Dead for longer than dead_retention_ but `keep`'s;
  // true when it dropped any.
  bool PurgeExpiredDead(int64_t now_ms, const std::string& keep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> WriteLocked(v1::Member member,
                                      int64_t expected_version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const VoteRules rules_;
  Clock* const clock_;
  const absl::Duration dead_retention_;

  mutable Mutex mu_;
  v1::MembershipView view_ ABSL_GUARDED_BY(mu_);
  // When each Dead row (by member id) was written Dead, in Unix ms.
  absl::flat_hash_map<std::string, int64_t> dead_since_ ABSL_GUARDED_BY(mu_);
  Mutex notify_mu_;
  std::vector<std::pair<int, std::function<void(const v1::MembershipView&)>>>
      subscribers_ ABSL_GUARDED_BY(notify_mu_);
  int next_id_ ABSL_GUARDED_BY(notify_mu_) = 1;
};

}  // namespace granary::storage
