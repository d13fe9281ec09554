#include "storage/membership_table.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/address.h"

namespace granary::storage {

absl::Status ValidateMember(const v1::Member& m, const v1::Member* previous) {
  std::string host;
  int port = 0;
  if (m.address().size() > kMaxAddressBytes ||
      !SplitHostPort(m.address(), &host, &port) || port <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "member address '", m.address().substr(0, kMaxAddressBytes),
        "' is not HOST:PORT"));
  }
  for (const std::string* a : {&m.gateway(), &m.http()}) {
    if (!a->empty() && (a->size() > kMaxAddressBytes ||
                        !SplitHostPort(*a, &host, &port))) {
      return absl::InvalidArgumentError(
          "member gateway and http must be HOST:PORT (or empty)");
    }
  }
  for (const v1::Suspicion& s : m.suspicions()) {
    if (s.by().size() > kMaxAddressBytes + 24) {
      return absl::InvalidArgumentError("a suspicion's voter id is too long");
    }
  }
  if (m.generation() <= 0) {
    return absl::InvalidArgumentError("member generation must be positive");
  }
  if (m.status() == v1::MEMBER_STATUS_UNSPECIFIED ||
      !v1::MemberStatus_IsValid(m.status())) {
    return absl::InvalidArgumentError("member status is missing or unknown");
  }
  if (m.grain_types_size() > kMaxGrainTypes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a member hosts at most ", kMaxGrainTypes, " grain types"));
  }
  for (const std::string& t : m.grain_types()) {
    if (t.empty() || t.size() > 256) {
      return absl::InvalidArgumentError(
          "a member's grain type name is empty or over 256 bytes");
    }
  }
  if (m.suspicions_size() > 64) {
    return absl::InvalidArgumentError("too many suspicions on one member");
  }
  if (m.ByteSizeLong() > kMaxMemberBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a membership row takes at most ", kMaxMemberBytes, " bytes, not ",
        m.ByteSizeLong()));
  }
  if (previous != nullptr && m.status() != v1::MEMBER_DEAD &&
      (m.grain_types_size() != previous->grain_types_size() ||
       !std::equal(m.grain_types().begin(), m.grain_types().end(),
                   previous->grain_types().begin()))) {
    return absl::InvalidArgumentError(
        "a member's grain types are set when its row is added (Joining) and "
        "change no more");
  }
  if (previous != nullptr && m.status() < previous->status()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "member ", MemberId(m), " cannot go from ",
        v1::MemberStatus_Name(previous->status()), " back to ",
        v1::MemberStatus_Name(m.status())));
  }
  return absl::OkStatus();
}

void NormalizeMember(v1::Member& m) {
  if (m.status() == v1::MEMBER_DEAD) m.clear_grain_types();
}

absl::Status CheckViewRoom(const v1::MembershipView& view, const v1::Member& next,
                           const v1::Member* previous) {
  // A repeated message field costs its bytes, a tag and a length.
  auto row_cost = [](const v1::Member& m) { return m.ByteSizeLong() + 4; };
  const size_t after = view.ByteSizeLong() + row_cost(next) -
                       (previous != nullptr ? row_cost(*previous) : 0);
  if (after > kMaxViewBytes && (previous == nullptr ||
                                row_cost(next) > row_cost(*previous))) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the membership view would take ", after, " bytes, past its cap of ",
        kMaxViewBytes));
  }
  if (previous == nullptr) {
    std::string host, other;
    int port = 0;
    SplitHostPort(next.address(), &host, &port);
    int same_host = 0;
    for (const v1::Member& m : view.members()) {
      if (m.status() == v1::MEMBER_DEAD) continue;
      if (SplitHostPort(m.address(), &other, &port) && other == host) ++same_host;
    }
    if (same_host >= kMaxLiveRowsPerHost) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "host ", host.substr(0, kMaxAddressBytes), " already has ",
          same_host, " membership rows that are not Dead (at most ",
          kMaxLiveRowsPerHost, ")"));
    }
  }
  return absl::OkStatus();
}

Task<absl::StatusOr<v1::MembershipView>> InMemoryMembershipTable::Read() {
  co_return Snapshot();
}

Task<absl::StatusOr<int64_t>> InMemoryMembershipTable::Write(
    v1::Member member, int64_t expected_version) {
  co_return WriteNow(std::move(member), expected_version);
}

bool InMemoryMembershipTable::RoomFor(const v1::Member& member,
                                      v1::Member*& row) {
  // Dead rows make room first (oldest first); `row` is re-found after each,
  // since a purge moves the rows.
  for (;;) {
    if (CheckViewRoom(view_, member, row).ok()) return true;
    if (row != nullptr && row->status() == v1::MEMBER_DEAD) return false;
    if (!PurgeOldestDead()) return false;
    row = nullptr;
    for (v1::Member& m : *view_.mutable_members()) {
      if (m.address() == member.address() &&
          m.generation() == member.generation()) {
        row = &m;
      }
    }
  }
}

bool InMemoryMembershipTable::PurgeOldestDead() {
  int oldest = -1;
  for (int i = 0; i < view_.members_size(); ++i) {
    const v1::Member& m = view_.members(i);
    if (m.status() != v1::MEMBER_DEAD) continue;
    if (oldest < 0 || m.generation() < view_.members(oldest).generation()) {
      oldest = i;
    }
  }
  if (oldest < 0) return false;
  view_.mutable_members()->DeleteSubrange(oldest, 1);
  return true;
}

v1::MembershipView InMemoryMembershipTable::Snapshot() const {
  MutexLock lock(&mu_);
  return view_;
}

absl::StatusOr<int64_t> InMemoryMembershipTable::WriteNow(
    v1::Member member, int64_t expected_version) {
  absl::StatusOr<int64_t> result;
  v1::MembershipView changed;
  {
    MutexLock lock(&mu_);
    NormalizeMember(member);
    v1::Member* row = nullptr;
    for (v1::Member& m : *view_.mutable_members()) {
      if (m.address() == member.address() &&
          m.generation() == member.generation()) {
        row = &m;
      }
    }
    if (expected_version != view_.version()) {
      result = absl::AbortedError(absl::StrCat(
          "membership table is at version ", view_.version(), ", not ",
          expected_version));
    } else if (absl::Status valid = ValidateMember(member, row); !valid.ok()) {
      result = valid;
    } else if (row == nullptr && view_.members_size() >= kMaxMembers &&
               !PurgeOldestDead()) {
      result = absl::ResourceExhaustedError(absl::StrCat(
          "membership table holds ", kMaxMembers, " live members"));
    } else if (!RoomFor(member, row)) {
      result = CheckViewRoom(view_, member, row);
    } else {
      if (row != nullptr) {
        *row = std::move(member);
      } else {
        *view_.add_members() = std::move(member);
      }
      view_.set_version(view_.version() + 1);
      result = view_.version();
      changed = view_;
    }
  }
  if (result.ok()) {
    MutexLock lock(&notify_mu_);
    for (auto& [id, fn] : subscribers_) fn(changed);
  }
  return result;
}

int InMemoryMembershipTable::Subscribe(
    std::function<void(const v1::MembershipView&)> fn) {
  MutexLock lock(&notify_mu_);
  const int id = next_id_++;
  subscribers_.emplace_back(id, std::move(fn));
  return id;
}

void InMemoryMembershipTable::Unsubscribe(int id) {
  MutexLock lock(&notify_mu_);
  for (auto it = subscribers_.begin(); it != subscribers_.end(); ++it) {
    if (it->first == id) {
      subscribers_.erase(it);
      return;
    }
  }
}

}  // namespace granary::storage
