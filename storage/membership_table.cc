#include "storage/membership_table.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "core/labels.h"
#include "core/status.h"

namespace granary::storage {

namespace {

bool Same(const std::string& a, const std::string& b) { return a == b; }
bool Same(const v1::HostedType& a, const v1::HostedType& b) {
  return a.type() == b.type() && a.version() == b.version() &&
         a.fingerprint() == b.fingerprint();
}
bool Same(const v1::Label& a, const v1::Label& b) {
  return a.key() == b.key() && a.value() == b.value();
}

template <typename R>
bool SameRepeated(const R& a, const R& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (!Same(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

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
    if (!a->empty() &&
        (a->size() > kMaxAddressBytes || !SplitHostPort(*a, &host, &port))) {
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
  if (m.hosted_types_size() != 0 &&
      m.hosted_types_size() != m.grain_types_size()) {
    return absl::InvalidArgumentError(
        "a member's hosted_types must list its grain_types, in order");
  }
  for (int i = 0; i < m.hosted_types_size(); ++i) {
    const v1::HostedType& h = m.hosted_types(i);
    if (h.type() != m.grain_types(i) || h.version() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a member's hosted type #", i,
          " must name its grain type, in order, with a version of 1 or more"));
    }
  }
  if (m.labels_size() > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("a member has at most ", kMaxLabels, " labels"));
  }
  for (int i = 0; i < m.labels_size(); ++i) {
    const v1::Label& l = m.labels(i);
    if (absl::Status s = ValidateLabel(l.key(), l.value()); !s.ok()) return s;
    if (i > 0 && !(m.labels(i - 1).key() < l.key())) {
      return absl::InvalidArgumentError(
          "a member's labels must be sorted by key, each key once");
    }
  }
  if (absl::Status s = ValidateLoad(m.load()); !s.ok()) return s;
  if (m.suspicions_size() > 64) {
    return absl::InvalidArgumentError("too many suspicions on one member");
  }
  if (m.ByteSizeLong() > kMaxMemberBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a membership row takes at most ", kMaxMemberBytes,
                     " bytes, not ", m.ByteSizeLong()));
  }
  if (previous != nullptr && m.status() != v1::MEMBER_DEAD &&
      (!SameRepeated(m.grain_types(), previous->grain_types()) ||
       !SameRepeated(m.hosted_types(), previous->hosted_types()) ||
       !SameRepeated(m.labels(), previous->labels()))) {
    return absl::InvalidArgumentError(
        "a member's grain types and labels are set when its row is added "
        "(Joining) and change no more");
  }
  if (previous != nullptr && m.status() < previous->status()) {
    return absl::InvalidArgumentError(
        absl::StrCat("member ", MemberId(m), " cannot go from ",
                     v1::MemberStatus_Name(previous->status()), " back to ",
                     v1::MemberStatus_Name(m.status())));
  }
  return absl::OkStatus();
}

Task<absl::StatusOr<v1::Member>> MembershipTable::ReadRow(v1::Member member) {
  absl::StatusOr<v1::MembershipView> view = co_await Read();
  if (!view.ok()) co_return view.status();
  const std::string id = MemberId(member);
  for (const v1::Member& m : view->members()) {
    if (MemberId(m) == id) co_return m;
  }
  co_return absl::NotFoundError(
      absl::StrCat("the membership table has no row for ", id));
}

absl::Status ValidateLoad(const v1::SiloLoad& load) {
  if (load.cpu_permille() > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("a member's load has cpu_permille ", load.cpu_permille(),
                     ", over 1000"));
  }
  if (load.memory_bytes() < 0 || load.memory_limit_bytes() < 0) {
    return absl::InvalidArgumentError(
        "a member's load has a negative memory figure");
  }
  return absl::OkStatus();
}

void NormalizeMember(v1::Member& m) {
  if (m.status() == v1::MEMBER_DEAD) {
    m.clear_grain_types();
    m.clear_hosted_types();
    m.clear_labels();
    m.clear_load();
  }
}

absl::Status CheckViewRoom(const v1::MembershipView& view,
                           const v1::Member& next, const v1::Member* previous) {
  // A repeated message field costs its bytes, a tag and a length.
  auto row_cost = [](const v1::Member& m) { return m.ByteSizeLong() + 4; };
  const size_t after = view.ByteSizeLong() + row_cost(next) -
                       (previous != nullptr ? row_cost(*previous) : 0);
  if (after > kMaxViewBytes &&
      (previous == nullptr || row_cost(next) > row_cost(*previous))) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the membership view would take ", after,
                     " bytes, past its cap of ", kMaxViewBytes));
  }
  if (previous == nullptr) {
    std::string host, other;
    int port = 0;
    SplitHostPort(next.address(), &host, &port);
    int same_host = 0;
    for (const v1::Member& m : view.members()) {
      if (m.status() == v1::MEMBER_DEAD) continue;
      if (SplitHostPort(m.address(), &other, &port) && other == host)
        ++same_host;
    }
    if (same_host >= kMaxLiveRowsPerHost) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "host ", host.substr(0, kMaxAddressBytes), " already has ", same_host,
          " membership rows that are not Dead (at most ", kMaxLiveRowsPerHost,
          ")"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The address of the live member `id` names, or nullptr.
const std::string* LiveAddress(const v1::MembershipView& view,
                               const std::string& id) {
  for (const v1::Member& m : view.members()) {
    if (IsLive(m) && MemberId(m) == id) return &m.address();
  }
  return nullptr;
}

bool SameVote(const v1::Suspicion& a, const v1::Suspicion& b) {
  return a.by() == b.by() && a.at_unix_ms() == b.at_unix_ms();
}

bool HasVote(const v1::Member& m, const v1::Suspicion& vote) {
  for (const v1::Suspicion& v : m.suspicions()) {
    if (SameVote(v, vote)) return true;
  }
  return false;
}

}  // namespace

bool VoteCounts(const v1::MembershipView& view, const v1::Member& target,
                const v1::Suspicion& vote, const VoteRules& rules,
                int64_t now_ms) {
  if (vote.at_unix_ms() <=
          now_ms - absl::ToInt64Milliseconds(rules.vote_expiry) ||
      vote.at_unix_ms() > now_ms + absl::ToInt64Milliseconds(kMaxVoteSkew)) {
    return false;
  }
  const std::string* voter = LiveAddress(view, vote.by());
  return voter != nullptr && *voter != target.address();
}

int CountVotes(const v1::MembershipView& view, const v1::Member& target,
               const VoteRules& rules, int64_t now_ms) {
  absl::flat_hash_set<std::string> voters;
  for (const v1::Suspicion& v : target.suspicions()) {
    if (VoteCounts(view, target, v, rules, now_ms)) {
      voters.insert(*LiveAddress(view, v.by()));
    }
  }
  return static_cast<int>(voters.size());
}

int VotesNeeded(const v1::MembershipView& view, const v1::Member& target,
                const VoteRules& rules, int64_t now_ms) {
  const int64_t fresh_after =
      now_ms - absl::ToInt64Milliseconds(rules.heartbeat_stale);
  absl::flat_hash_set<std::string> voters;
  for (const v1::Member& m : view.members()) {
    if (IsLive(m) && m.address() != target.address() &&
        m.heartbeat_unix_ms() > fresh_after) {
      voters.insert(m.address());
    }
  }
  return std::max(
      1, std::min(rules.votes_to_kill, static_cast<int>(voters.size())));
}

absl::Status CheckVotes(const v1::MembershipView& view, const v1::Member& next,
                        const v1::Member* previous, const VoteRules& rules,
                        int64_t now_ms) {
  if (previous == nullptr) {
    if (next.suspicions_size() > 0) {
      return absl::FailedPreconditionError(
          "a new membership row carries no suspicion votes");
    }
    return absl::OkStatus();
  }
  bool added = false;
  absl::flat_hash_set<std::string> voters;  // addresses, in `next`
  for (const v1::Suspicion& v : next.suspicions()) {
    const std::string* voter = LiveAddress(view, v.by());
    if (HasVote(*previous, v)) {
      if (voter != nullptr) voters.insert(*voter);
      continue;
    }
    added = true;
    if (!VoteCounts(view, next, v, rules, now_ms)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a suspicion vote on ", MemberId(next),
          " must come from another live member, dated within ",
          absl::FormatDuration(rules.vote_expiry), " before now and at most ",
          absl::FormatDuration(kMaxVoteSkew), " after"));
    }
  }
  for (const v1::Suspicion& v : next.suspicions()) {
    if (HasVote(*previous, v)) continue;
    if (!voters.insert(*LiveAddress(view, v.by())).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("one silo address votes once on ", MemberId(next)));
    }
  }
  // A vote may go a little before it expires by the table's clock: the
  // silo dropping it judges by its own, which may run ahead by the skew.
  VoteRules dropping = rules;
  dropping.vote_expiry =
      std::max(absl::ZeroDuration(), rules.vote_expiry - kMaxVoteSkew);
  for (const v1::Suspicion& v : previous->suspicions()) {
    if (HasVote(next, v) || !VoteCounts(view, *previous, v, dropping, now_ms)) {
      continue;
    }
    // A counted vote goes only when its voter's address keeps a vote (its
    // newer one): the counted votes never drop before they expire.
    if (!voters.contains(*LiveAddress(view, v.by()))) {
      return absl::FailedPreconditionError(
          absl::StrCat("the vote of ", v.by(), " on ", MemberId(next),
                       " stays until it expires"));
    }
  }
  if (added && next.status() == v1::MEMBER_DEAD &&
      previous->status() != v1::MEMBER_DEAD) {
    const int votes = CountVotes(view, next, rules, now_ms);
    const int needed = VotesNeeded(view, next, rules, now_ms);
    if (votes < needed) {
      return absl::FailedPreconditionError(
          absl::StrCat(MemberId(next), " is declared dead with ", needed,
                       " votes from live members, not ", votes));
    }
  }
  return absl::OkStatus();
}

InMemoryMembershipTable::InMemoryMembershipTable(VoteRules rules,
                                                 absl::Duration dead_retention)
    : rules_(rules),
      clock_(rules.clock != nullptr ? rules.clock : Clock::System()),
      dead_retention_(dead_retention) {}

Task<absl::StatusOr<v1::MembershipView>> InMemoryMembershipTable::Read() {
  co_return Snapshot();
}

Task<absl::StatusOr<int64_t>> InMemoryMembershipTable::Write(
    v1::Member member, int64_t expected_version) {
  co_return WriteNow(std::move(member), expected_version);
}

bool InMemoryMembershipTable::RoomFor(const v1::Member& member,
                                      v1::Member*& row, bool* purged) {
  // Dead rows make room first (oldest first); `row` is re-found after each,
  // since a purge moves the rows.
  for (;;) {
    if (CheckViewRoom(view_, member, row).ok()) return true;
    if (row != nullptr && row->status() == v1::MEMBER_DEAD) return false;
    if (!PurgeOldestDead()) return false;
    *purged = true;
    row = nullptr;
    for (v1::Member& m : *view_.mutable_members()) {
      if (m.address() == member.address() &&
          m.generation() == member.generation()) {
        row = &m;
      }
    }
  }
}

bool InMemoryMembershipTable::PurgeExpiredDead(int64_t now_ms,
                                               const std::string& keep) {
  const int64_t before = now_ms - absl::ToInt64Milliseconds(dead_retention_);
  auto* rows = view_.mutable_members();
  bool purged = false;
  for (int i = rows->size() - 1; i >= 0; --i) {
    const v1::Member& m = rows->Get(i);
    if (m.status() != v1::MEMBER_DEAD) continue;
    const std::string id = MemberId(m);
    auto since = dead_since_.find(id);
    if (id != keep && (since == dead_since_.end() || since->second < before)) {
      dead_since_.erase(id);
      rows->DeleteSubrange(i, 1);
      purged = true;
    }
  }
  return purged;
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
  dead_since_.erase(MemberId(view_.members(oldest)));
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
  bool moved = false;
  {
    MutexLock lock(&mu_);
    const int64_t before = view_.version();
    result = WriteLocked(std::move(member), expected_version);
    // A refused write may still have purged Dead rows (a version of its own).
    moved = view_.version() != before;
    if (moved) changed = view_;
  }
  if (moved) {
    MutexLock lock(&notify_mu_);
    for (auto& [id, fn] : subscribers_) fn(changed);
  }
  return result;
}

absl::StatusOr<int64_t> InMemoryMembershipTable::WriteLocked(
    v1::Member member, int64_t expected_version) {
  if (expected_version != view_.version()) {
    return absl::AbortedError(absl::StrCat("membership table is at version ",
                                           view_.version(), ", not ",
                                           expected_version));
  }
  v1::Member* row = nullptr;
  for (v1::Member& m : *view_.mutable_members()) {
    if (m.address() == member.address() &&
        m.generation() == member.generation()) {
      row = &m;
    }
  }
  GRANARY_RETURN_IF_ERROR(ValidateMember(member, row));
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  GRANARY_RETURN_IF_ERROR(CheckVotes(view_, member, row, rules_, now_ms));
  NormalizeMember(member);
  const std::string id = MemberId(member);
  const bool goes_dead = member.status() == v1::MEMBER_DEAD &&
                         (row == nullptr || row->status() != v1::MEMBER_DEAD);
  // Rows Dead past their retention go with the change they follow (every
  // silo's heartbeat is one); the row being written stays. Purges that
  // make room stand even when the write is then refused: the table moves
  // to a version of its own.
  bool purged = PurgeExpiredDead(now_ms, id);
  if (purged) {
    row = nullptr;
    for (v1::Member& m : *view_.mutable_members()) {
      if (MemberId(m) == id) row = &m;
    }
  }
  absl::Status room = absl::OkStatus();
  if (row == nullptr && view_.members_size() >= kMaxMembers) {
    if (PurgeOldestDead()) {
      purged = true;
    } else {
      room = absl::ResourceExhaustedError(absl::StrCat(
          "membership table holds ", kMaxMembers, " live members"));
    }
  }
  if (room.ok() && !RoomFor(member, row, &purged)) {
    room = CheckViewRoom(view_, member, row);
  }
  if (!room.ok()) {
    if (purged) view_.set_version(view_.version() + 1);
    return room;
  }
  if (row != nullptr) {
    *row = std::move(member);
  } else {
    *view_.add_members() = std::move(member);
  }
  if (goes_dead) dead_since_[id] = now_ms;
  view_.set_version(view_.version() + 1);
  return view_.version();
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
