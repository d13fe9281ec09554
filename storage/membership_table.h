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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/member.h"
#include "core/sync.h"
#include "core/task.h"
#include "granary/v1/cluster.pb.h"

namespace granary::storage {

class MembershipTable {
 public:
  virtual ~MembershipTable() = default;
  virtual Task<absl::StatusOr<v1::MembershipView>> Read() = 0;
  // Writes `member` (replacing the row of the same address and generation)
  // if the table is at `expected_version`: the new version, ABORTED when it
  // is not, INVALID_ARGUMENT for a malformed row or a backwards status.
  virtual Task<absl::StatusOr<int64_t>> Write(v1::Member member,
                                              int64_t expected_version) = 0;
  // Records the heartbeat of `member` (its heartbeat_unix_ms and
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

// What the table stores for `m`: a Dead row drops its grain types (no live
// silo hosts them there, and the view stays small).
void NormalizeMember(v1::Member& m);

// OK when `view` may take `next` in place of `previous` (nullptr: a new
// row): RESOURCE_EXHAUSTED when the view would grow past kMaxViewBytes, or
// the host of a new row already has kMaxLiveRowsPerHost rows not Dead.
absl::Status CheckViewRoom(const v1::MembershipView& view, const v1::Member& next,
                           const v1::Member* previous);

// Silos' names and liveness (core/member.h), as the stores' users know them.
using granary::IsLive;
using granary::MemberId;

class InMemoryMembershipTable final : public MembershipTable {
 public:
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
  // rows are purged as needed (`row` then points to the row anew).
  bool RoomFor(const v1::Member& member, v1::Member*& row)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the oldest Dead row; false when there is none.
  bool PurgeOldestDead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  v1::MembershipView view_ ABSL_GUARDED_BY(mu_);
  Mutex notify_mu_;
  std::vector<std::pair<int, std::function<void(const v1::MembershipView&)>>>
      subscribers_ ABSL_GUARDED_BY(notify_mu_);
  int next_id_ ABSL_GUARDED_BY(notify_mu_) = 1;
};

}  // namespace granary::storage
