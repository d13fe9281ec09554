#include "directory/partition.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/clock.h"
#include "core/member.h"
#include "core/status.h"

namespace granary::directory {
namespace {

constexpr size_t kMaxTypeBytes = 256;

v1::DirectoryEntry ToEntry(const GrainId& id, const ActivationAddress& a) {
  v1::DirectoryEntry e;
  e.set_type(std::string(id.type()));
  e.set_key(id.key());
  e.set_silo(a.silo);
  e.set_activation_id(a.activation_id);
  return e;
}

ActivationAddress ToAddress(const v1::DirectoryEntry& e) {
  return ActivationAddress{e.silo(), e.activation_id()};
}

}  // namespace

uint64_t RingIdentity(const v1::MembershipView& view) {
  // Statuses only move forward and a member never returns once Dead, so
  // this set of (member, status) never recurs: neither does the identity,
  // even when the Active silos come back to an earlier set.
  std::vector<std::string> rows;
  for (const v1::Member& m : view.members()) {
    if (m.status() == v1::MEMBER_ACTIVE ||
        m.status() == v1::MEMBER_SHUTTING_DOWN ||
        m.status() == v1::MEMBER_DEAD) {
      rows.push_back(absl::StrCat(MemberId(m), " ", m.status()));
    }
  }
  std::sort(rows.begin(), rows.end());
  return directory::StableHash(absl::StrJoin(rows, "\n"));
}

DirectoryPartition::DirectoryPartition(std::string self_id, const Clock* clock)
    : clock_(clock),
      self_id_(std::move(self_id)),
      ring_(std::make_shared<HashRing>(std::vector<std::string>{})) {}

void DirectoryPartition::OnView(const v1::MembershipView& view) {
  std::vector<std::string> active;
  std::vector<std::string> dead;
  absl::flat_hash_set<std::string> active_set;
  absl::flat_hash_set<std::string> hosts;
  for (const v1::Member& m : view.members()) {
    if (m.status() == v1::MEMBER_ACTIVE) {
      active.push_back(MemberId(m));
      active_set.insert(active.back());
    }
    if (m.status() == v1::MEMBER_ACTIVE ||
        m.status() == v1::MEMBER_SHUTTING_DOWN) {
      hosts.insert(MemberId(m));
    }
    if (m.status() == v1::MEMBER_DEAD) dead.push_back(MemberId(m));
  }
  auto ring = std::make_shared<const HashRing>(std::move(active));
  const uint64_t identity = RingIdentity(view);
  // Exclusive: no request is between its ownership check and its change of
  // the partition while ownership moves.
  MutexLock lock(&mu_);
  if (view.version() < version_) return;
  version_ = view.version();
  hosts_ = std::move(hosts);
  active_ = std::move(active_set);
  // Silos newly dead keep their entries through the grace (see
  // set_dead_grace); those whose grace is over lose them.
  const int64_t now = NowNanos();
  for (const std::string& silo : dead) {
    if (!dead_seen_.insert(silo).second) continue;
    if (dead_grace_ns_ > 0) {
      dead_until_[silo] = now + dead_grace_ns_;
      // Ranges owned under the ring before the death are answered; with a
      // grace already running, nothing not found is.
      grace_ring_ = now < grace_until_ ? nullptr : ring_;
      grace_until_ = std::max(grace_until_, now + dead_grace_ns_);
    } else {
      partition_.RemoveSilo(silo);
    }
  }
  PurgeDead(now);
  if (identity == ring_id_) {
    // The same silos and statuses: entries and the rebuild state stay as
    // they are, but a silo that left may have been the last one to report.
    MaybeRebuilt();
    return;
  }
  // A new ring: what it moved here is answered once every Active silo has
  // reported its activations for it (Rebuild).
  if (stable_ring_ != ring_)
    stable_ring_ = nullptr;  // changed mid-rebuild
  else
    stable_ring_ = ring_;
  reported_.clear();
  ring_ = ring;
  ring_id_ = identity;
  (void)partition_.Extract(
      [&](const GrainId& id) { return ring->OwnerOf(id) != self_id_; });
}

void DirectoryPartition::PurgeDead(int64_t now_ns) {
  for (auto it = dead_until_.begin(); it != dead_until_.end();) {
    if (it->second <= now_ns) {
      partition_.RemoveSilo(it->first);
      dead_until_.erase(it++);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<ActivationAddress> DirectoryPartition::LiveEntry(
    const GrainId& id) const {
  absl::StatusOr<ActivationAddress> found = partition_.Lookup(id);
  if (!found.ok()) return found;
  auto dead = dead_until_.find(found->silo);
  if (dead != dead_until_.end() && dead->second <= NowNanos()) {
    // Its silo's grace is over: the entry goes (the partition has its own
    // lock; the next view drops the silo's other entries).
    (void)partition_.Unregister(id, *found);
    return absl::NotFoundError("the grain's silo is dead");
  }
  return found;
}

void DirectoryPartition::MaybeRebuilt() {
  if (stable_ring_ == ring_) return;
  // Every silo that may host activations (Active or ShuttingDown) has
  // reported; a silo that died meanwhile has nothing left to report.
  for (const std::string& silo : hosts_) {
    if (!reported_.contains(silo)) return;
  }
  stable_ring_ = ring_;
}

bool DirectoryPartition::rebuilding() const {
  ReaderMutexLock lock(&mu_);
  return stable_ring_ != ring_;
}

uint64_t DirectoryPartition::ring_fingerprint() const {
  ReaderMutexLock lock(&mu_);
  return ring_id_;
}

absl::Status DirectoryPartition::CheckRebuilt(const GrainId& id) const {
  if (NowNanos() < grace_until_ &&
      (grace_ring_ == nullptr || grace_ring_->OwnerOf(id) != self_id_)) {
    // The range came from a silo declared dead a moment ago, which may run
    // its grains until its lease is over: not found is no answer yet.
    return absl::UnavailableError(
        absl::StrCat("silo ", self_id_,
                     " waits out the lease of a silo declared dead "
                     "before it answers that ",
                     id.ToString(), " is not active; retry"));
  }
  if (stable_ring_ == ring_) return absl::OkStatus();
  if (stable_ring_ != nullptr && stable_ring_->OwnerOf(id) == self_id_) {
    return absl::OkStatus();  // owned before the change too: nothing lost
  }
  return absl::UnavailableError(absl::StrCat(
      "silo ", self_id_, " is rebuilding the directory entries of ",
      id.ToString(), "'s range after a membership change; retry"));
}

absl::StatusOr<v1::RebuildReply> DirectoryPartition::Rebuild(
    const v1::RebuildRequest& r) {
  // Exclusive: the report and the completion check are one step.
  MutexLock lock(&mu_);
  if (self_id_.empty() || ring_->empty()) {
    return absl::UnavailableError("the directory has no view yet");
  }
  if (r.ring() != ring_id_) {
    return absl::UnavailableError(
        absl::StrCat("silo ", self_id_, " is on another ring (view ", version_,
                     "); retry once the views agree"));
  }
  if (!hosts_.contains(r.from())) {
    return absl::FailedPreconditionError(
        absl::StrCat("silo '", r.from(),
                     "' is not Active or ShuttingDown in view ", version_));
  }
  // Everything is checked before anything changes.
  std::vector<GrainId> ids;
  ids.reserve(r.entries_size());
  for (const v1::DirectoryEntry& e : r.entries()) {
    if (e.type().empty() || e.type().size() > kMaxTypeBytes) {
      return absl::InvalidArgumentError(
          "rebuild entry without a grain type, or one over 256 bytes");
    }
    GRANARY_RETURN_IF_ERROR(ValidateGrainKey(e.key()));
    if (e.silo() != r.from()) {
      return absl::InvalidArgumentError(
          "a silo may report only activations it hosts");
    }
    GrainId id(absl::string_view(e.type()), e.key());
    if (ring_->OwnerOf(id) != self_id_) {
      return absl::FailedPreconditionError(
          absl::StrCat("silo ", self_id_, " does not own ", id.ToString()));
    }
    ids.push_back(std::move(id));
  }
  v1::RebuildReply reply;
  for (int i = 0; i < r.entries_size(); ++i) {
    const GrainId id(InternTypeName(ids[i].type()), ids[i].key());
    const ActivationAddress mine = ToAddress(r.entries(i));
    absl::StatusOr<ActivationAddress> winner =
        partition_.RegisterIfAbsent(id, mine);
    if (winner.ok() && !(*winner == mine)) {
      *reply.add_conflicts() = r.entries(i);
    }
  }
  if (!r.more()) reported_.insert(r.from());
  MaybeRebuilt();
  return reply;
}

std::string DirectoryPartition::OwnerOf(const GrainId& id) const {
  ReaderMutexLock lock(&mu_);
  return ring_->OwnerOf(id);
}

int64_t DirectoryPartition::view_version() const {
  ReaderMutexLock lock(&mu_);
  return version_;
}

absl::Status DirectoryPartition::Check(const v1::DirectoryRequest& r,
                                       GrainId* id) const {
  const v1::DirectoryEntry& e = r.entry();
  if (e.type().empty() || e.type().size() > kMaxTypeBytes) {
    return absl::InvalidArgumentError(
        "directory request without a grain type, or one over 256 bytes");
  }
  GRANARY_RETURN_IF_ERROR(ValidateGrainKey(e.key()));
  // Not interned: the request's bytes live as long as the request, and only
  // a registration (which keeps the id) interns the type.
  *id = GrainId(absl::string_view(e.type()), e.key());
  if (self_id_.empty() || ring_->empty()) {
    return absl::UnavailableError("the directory has no view yet");
  }
  if (r.view_version() > version_) {
    return absl::UnavailableError(
        absl::StrCat("silo ", self_id_, " is at view ", version_,
                     ", behind the caller's ", r.view_version(), "; retry"));
  }
  const std::string& owner = ring_->OwnerOf(*id);
  if (owner != self_id_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "silo ", self_id_, " does not own ", id->ToString(), " under view ",
        version_, " (owner: ", owner.empty() ? "none" : owner, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DirectoryReply> DirectoryPartition::Register(
    const v1::DirectoryRequest& r) {
  ReaderMutexLock lock(&mu_);
  GrainId checked;
  GRANARY_RETURN_IF_ERROR(Check(r, &checked));
  if (!active_.contains(r.entry().silo())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "silo '", r.entry().silo(), "' is not Active in view ", version_));
  }
  const ActivationAddress mine = ToAddress(r.entry());
  if (!LiveEntry(checked).ok()) {
    GRANARY_RETURN_IF_ERROR(CheckRebuilt(checked));
  }
  const GrainId id(InternTypeName(checked.type()), checked.key());
  absl::StatusOr<ActivationAddress> winner;
  if (r.move()) {
    // A migration: from exactly the entry in force, never registering a
    // grain nobody hosts (its old activation is gone: it lost the race).
    if (!r.has_replace() || r.replace().silo() == r.entry().silo() ||
        r.replace().type() != r.entry().type() ||
        r.replace().key() != r.entry().key()) {
      return absl::InvalidArgumentError(
          "a move names the same grain's entry on another silo to replace");
    }
    winner = partition_.ReplaceIf(id, ToAddress(r.replace()), mine);
    if (winner.status().code() == absl::StatusCode::kNotFound) {
      if (!r.confirm()) {
        return absl::AbortedError(absl::StrCat("no directory entry of ",
                                               id.ToString(),
                                               " to move: it was removed"));
      }
      winner = partition_.RegisterIfAbsent(id, mine);
    }
  } else if (r.has_replace()) {
    // A silo retires only its own stale entry, and only the one in force.
    if (r.replace().silo() != r.entry().silo()) {
      return absl::InvalidArgumentError(
          "a silo may replace only its own directory entries");
    }
    winner = partition_.ReplaceIf(id, ToAddress(r.replace()), mine);
    if (winner.status().code() == absl::StatusCode::kNotFound) {
      winner = partition_.RegisterIfAbsent(id, mine);
    }
  } else {
    winner = partition_.RegisterIfAbsent(id, mine);
  }
  GRANARY_RETURN_IF_ERROR(winner.status());
  v1::DirectoryReply reply;
  reply.set_found(true);
  *reply.mutable_entry() = ToEntry(id, *winner);
  reply.set_view_version(version_);
  return reply;
}

absl::StatusOr<v1::DirectoryReply> DirectoryPartition::Lookup(
    const v1::DirectoryRequest& r) {
  ReaderMutexLock lock(&mu_);
  GrainId id;
  GRANARY_RETURN_IF_ERROR(Check(r, &id));
  v1::DirectoryReply reply;
  reply.set_view_version(version_);
  absl::StatusOr<ActivationAddress> found = LiveEntry(id);
  if (found.ok()) {
    reply.set_found(true);
    *reply.mutable_entry() = ToEntry(id, *found);
  } else {
    GRANARY_RETURN_IF_ERROR(CheckRebuilt(id));
  }
  return reply;
}

absl::StatusOr<v1::DirectoryReply> DirectoryPartition::Unregister(
    const v1::DirectoryRequest& r) {
  ReaderMutexLock lock(&mu_);
  GrainId id;
  GRANARY_RETURN_IF_ERROR(Check(r, &id));
  GRANARY_RETURN_IF_ERROR(partition_.Unregister(id, ToAddress(r.entry())));
  v1::DirectoryReply reply;
  reply.set_view_version(version_);
  absl::StatusOr<ActivationAddress> left = partition_.Lookup(id);
  if (left.ok()) {
    reply.set_found(true);
    *reply.mutable_entry() = ToEntry(id, *left);
  }
  return reply;
}

}  // namespace granary::directory
