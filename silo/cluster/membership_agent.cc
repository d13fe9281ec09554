#include "silo/cluster/membership_agent.h"

#include "core/clock.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "directory/hash_ring.h"
#include "grpcpp/grpcpp.h"
#include "silo/runtime/silo_metrics.h"

namespace granary::silo {
namespace {

using storage::IsLive;
// Every silo orders the probe ring alike.
using directory::StableHash;

absl::StatusOr<v1::MembershipView> ReadSync(storage::MembershipTable* table) {
  Notification done;
  absl::StatusOr<v1::MembershipView> out;
  table->Read([&](absl::StatusOr<v1::MembershipView> v) {
    out = std::move(v);
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

absl::StatusOr<int64_t> WriteSync(storage::MembershipTable* table,
                                  v1::Member m, int64_t expected) {
  Notification done;
  absl::StatusOr<int64_t> out;
  table->Write(std::move(m), expected, [&](absl::StatusOr<int64_t> v) {
    out = std::move(v);
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

}  // namespace

absl::Status ValidateMembershipOptions(const MembershipOptions& o) {
  if (o.probe_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("probe interval must be positive");
  }
  if (o.probe_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("probe timeout must be positive");
  }
  if (o.missed_probes < 1) {
    return absl::InvalidArgumentError("missed probes must be at least 1");
  }
  if (o.votes_to_kill < 1) {
    return absl::InvalidArgumentError("votes to kill must be at least 1");
  }
  if (o.probe_fanout < 1) {
    return absl::InvalidArgumentError("probe fanout must be at least 1");
  }
  if (o.vote_expiry <= o.probe_interval * o.missed_probes) {
    return absl::InvalidArgumentError(
        "vote expiry must be longer than probe interval x missed probes");
  }
  if (o.lease < absl::ZeroDuration() ||
      o.lease >= (o.missed_probes - 1) * o.probe_interval + o.probe_timeout) {
    return absl::InvalidArgumentError(
        "the lease must be shorter than (missed probes - 1) x probe interval "
        "+ probe timeout, the quickest the cluster can declare a silo dead");
  }
  return absl::OkStatus();
}

absl::Duration SafeLease(const MembershipOptions& o) {
  return ((o.missed_probes - 1) * o.probe_interval + o.probe_timeout) * 0.8;
}

MembershipAgent::MembershipAgent(storage::MembershipTable* table,
                                 v1::Member self, MembershipOptions options,
                                 std::function<int64_t()> activations)
    : table_(table),
      options_(options),
      activations_(std::move(activations)),
      self_(std::move(self)),
      id_(storage::MemberId(self_)) {
  if (self_.start_unix_ms() == 0) {
    self_.set_start_unix_ms(absl::ToUnixMillis(absl::Now()));
  }
}

MembershipAgent::~MembershipAgent() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  if (lease_thread_.joinable()) lease_thread_.join();
}

void MembershipAgent::SetLeaseListener(std::function<void(int64_t)> fn) {
  on_lease_ = std::move(fn);
}

void MembershipAgent::LeaseLoop() {
  const absl::Duration period = options_.lease / 3;
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_ || declared_dead_) return;
    }
    const int64_t sent = MonoNanos();
    absl::StatusOr<v1::MembershipView> view = ReadSync(table_);
    if (view.ok()) {
      bool alive = false;
      for (const v1::Member& m : view->members()) {
        if (storage::MemberId(m) == id_) alive = storage::IsLive(m);
      }
      // The table showed this silo alive at some moment after `sent`
      // (renewed before the view's listeners run, which take their time).
      if (alive) on_lease_(sent + absl::ToInt64Nanoseconds(options_.lease));
      OnView(*view);
    }
    MutexLock lock(&mu_);
    const absl::Time wake = absl::Now() + period;
    while (!stopping_ && !declared_dead_ && absl::Now() < wake) {
      cv_.WaitWithDeadline(&mu_, wake);
    }
  }
}

void MembershipAgent::SetDeclaredDeadHandler(std::function<void()> fn) {
  MutexLock lock(&mu_);
  on_dead_ = std::move(fn);
}

absl::Status MembershipAgent::Update(
    const std::string& id, const std::function<bool(v1::Member*)>& mutate) {
  absl::Status last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    absl::StatusOr<v1::MembershipView> view = ReadSync(table_);
    if (!view.ok()) return view.status();
    OnView(*view);
    v1::Member row;
    bool found = false;
    for (const v1::Member& m : view->members()) {
      if (storage::MemberId(m) == id) {
        row = m;
        found = true;
      }
    }
    if (!found) {
      if (id != id_) return absl::NotFoundError(absl::StrCat("no member ", id));
      row = self_;
    }
    if (!mutate(&row)) return absl::OkStatus();  // nothing to change
    absl::StatusOr<int64_t> written = WriteSync(table_, row, view->version());
    if (written.ok()) {
      // Our own write is the newest view we know of.
      v1::MembershipView next = *view;
      bool replaced = false;
      for (v1::Member& m : *next.mutable_members()) {
        if (storage::MemberId(m) == id) {
          m = row;
          replaced = true;
        }
      }
      if (!replaced) *next.add_members() = row;
      next.set_version(*written);
      OnView(next);
      return absl::OkStatus();
    }
    last = written.status();
    if (last.code() != absl::StatusCode::kAborted) return last;
  }
  return last;
}

absl::Status MembershipAgent::WriteSelf(v1::MemberStatus status) {
  return Update(id_, [&](v1::Member* row) {
    if (row->status() == v1::MEMBER_DEAD && status != v1::MEMBER_DEAD) {
      return false;  // declared dead meanwhile: never revived
    }
    if (row->status() > status) return false;
    const auto suspicions = row->suspicions();
    *row = self_;
    *row->mutable_suspicions() = suspicions;
    row->set_status(status);
    row->set_heartbeat_unix_ms(absl::ToUnixMillis(absl::Now()));
    if (activations_) row->set_activations(activations_());
    return true;
  });
}

absl::Status MembershipAgent::Join(absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  absl::Status s;
  for (v1::MemberStatus status : {v1::MEMBER_JOINING, v1::MEMBER_ACTIVE}) {
    while (true) {
      s = WriteSelf(status);
      if (s.ok() || s.code() != absl::StatusCode::kUnavailable ||
          absl::Now() >= give_up) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("joining the cluster: ",
                                                 s.message()));
    }
  }
  last_heartbeat_ = absl::Now();
  GRANARY_LOG(kInfo) << "silo=" << id_ << " joined the cluster";
  return absl::OkStatus();
}

void MembershipAgent::Start() {
  thread_ = std::thread([this] { Loop(); });
  if (options_.lease > absl::ZeroDuration() && on_lease_) {
    lease_thread_ = std::thread([this] { LeaseLoop(); });
  }
}

void MembershipAgent::SetViewListener(
    std::function<void(const v1::MembershipView&)> fn) {
  v1::MembershipView current = view();
  MutexLock lock(&listener_mu_);
  listener_ = std::move(fn);
  notified_version_ = -1;
  if (listener_ && current.version() > 0) {
    notified_version_ = current.version();
    listener_(current);
  }
}

void MembershipAgent::OnView(const v1::MembershipView& view) {
  {
    MutexLock lock(&mu_);
    if (view.version() < view_.version()) return;
    viewed_at_ = absl::Now();
    if (view.version() == view_.version()) return;
    view_ = view;
    for (const v1::Member& m : view_.members()) {
      if (storage::MemberId(m) == id_ && m.status() == v1::MEMBER_DEAD &&
          !declared_dead_) {
        declared_dead_ = true;
        cv_.SignalAll();
      }
    }
  }
  MutexLock lock(&listener_mu_);
  if (listener_ && view.version() > notified_version_) {
    notified_version_ = view.version();
    listener_(view);
  }
}

void MembershipAgent::Refresh() {
  absl::StatusOr<v1::MembershipView> view = ReadSync(table_);
  if (view.ok()) {
    OnView(*view);
  } else {
    GRANARY_LOG(kWarning) << "silo=" << id_
                          << " cannot read the membership table: "
                          << view.status();
  }
}

void MembershipAgent::Loop() {
  absl::Time next = absl::Now();
  while (true) {
    std::function<void()> on_dead;
    {
      MutexLock lock(&mu_);
      next += options_.probe_interval;
      while (!stopping_ && !declared_dead_ && absl::Now() < next) {
        cv_.WaitWithDeadline(&mu_, next);
      }
      if (stopping_) return;
      if (!declared_dead_ &&
          absl::Now() - viewed_at_ >= options_.refresh_period) {
        mu_.Unlock();
        Refresh();
        mu_.Lock();
      }
      if (declared_dead_) {  // never probe or vote once declared dead
        on_dead = on_dead_;
        stopping_ = true;
      }
      if (next < absl::Now()) next = absl::Now();
    }
    if (stopping_declared()) {
      GRANARY_LOG(kError) << "silo=" << id_
                          << " the cluster declared this silo dead";
      if (on_dead) on_dead();
      return;
    }
    if (absl::Now() - last_heartbeat_ >= options_.heartbeat_period) {
      last_heartbeat_ = absl::Now();
      (void)Update(id_, [&](v1::Member* row) {
        if (!IsLive(*row)) return false;
        row->set_heartbeat_unix_ms(absl::ToUnixMillis(absl::Now()));
        if (activations_) row->set_activations(activations_());
        return true;
      });
    }
    ProbeRound();
  }
}

void MembershipAgent::ProbeRound() {
  std::vector<v1::Member> live;
  {
    MutexLock lock(&mu_);
    for (const v1::Member& m : view_.members()) {
      if (IsLive(m)) live.push_back(m);
    }
  }
  const uint64_t me = StableHash(id_);
  std::sort(live.begin(), live.end(),
            [&](const v1::Member& a, const v1::Member& b) {
              // Ring order starting just after this silo.
              return StableHash(storage::MemberId(a)) - me - 1 <
                     StableHash(storage::MemberId(b)) - me - 1;
            });
  int probed = 0;
  absl::flat_hash_set<std::string> targets;
  for (const v1::Member& target : live) {
    const std::string target_id = storage::MemberId(target);
    if (target_id == id_) continue;
    if (probed++ >= options_.probe_fanout) break;
    targets.insert(target_id);
    if (Probe(target)) {
      misses_.erase(target_id);
      continue;
    }
    probes_missed_.fetch_add(1);
    if (++misses_[target_id] >= options_.missed_probes &&
        target.address() != options_.table_host) {
      Vote(target_id);
    }
  }
  // Misses count only while consecutive and while the silo is a target.
  for (auto it = misses_.begin(); it != misses_.end();) {
    if (!targets.contains(it->first)) {
      misses_.erase(it++);
    } else {
      ++it;
    }
  }
  for (auto it = stubs_.begin(); it != stubs_.end();) {
    bool wanted = false;
    for (const v1::Member& m : live) wanted = wanted || m.address() == it->first;
    if (!wanted) {
      stubs_.erase(it++);
    } else {
      ++it;
    }
  }
}

bool MembershipAgent::Probe(const v1::Member& target) {
  std::unique_ptr<v1::SiloControl::Stub>& stub = stubs_[target.address()];
  if (stub == nullptr) {
    stub = v1::SiloControl::NewStub(grpc::CreateChannel(
        target.address(), grpc::InsecureChannelCredentials()));
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.probe_timeout));
  v1::ProbeRequest request;
  request.set_from(id_);
  v1::ProbeReply reply;
  grpc::Status s = stub->Probe(&context, request, &reply);
  // Another generation answering on that address means this one is gone.
  return s.ok() && reply.id() == storage::MemberId(target);
}

void MembershipAgent::Vote(const std::string& target_id) {
  int votes = 0, needed = 0;
  bool killed = false;
  absl::Status s = Update(target_id, [&](v1::Member* row) {
    if (row->status() == v1::MEMBER_DEAD) return false;
    const int64_t now = absl::ToUnixMillis(absl::Now());
    const int64_t fresh_after =
        now - absl::ToInt64Milliseconds(options_.vote_expiry);
    // Votes count only from live members, one per silo address (a restarted
    // silo's old votes do not add to its new ones). Members that are
    // themselves suspected do not count as voters who could still vote.
    absl::flat_hash_map<std::string, std::string> live_addresses;  // id -> addr
    int voters = 0;
    {
      MutexLock lock(&mu_);
      for (const v1::Member& m : view_.members()) {
        if (!IsLive(m)) continue;
        const std::string id = storage::MemberId(m);
        live_addresses.emplace(id, m.address());
        if (id == target_id) continue;
        bool suspected = false;
        for (const v1::Suspicion& v : m.suspicions()) {
          suspected = suspected || v.at_unix_ms() > fresh_after;
        }
        if (!suspected || id == id_) ++voters;
      }
    }
    google::protobuf::RepeatedPtrField<v1::Suspicion> kept;
    absl::flat_hash_set<std::string> addresses = {self_.address()};
    for (const v1::Suspicion& v : row->suspicions()) {
      auto live = live_addresses.find(v.by());
      if (v.at_unix_ms() <= fresh_after || v.by() == id_ ||
          live == live_addresses.end() ||
          !addresses.insert(live->second).second) {
        continue;
      }
      *kept.Add() = v;
    }
    v1::Suspicion* mine = kept.Add();
    mine->set_by(id_);
    mine->set_at_unix_ms(now);
    *row->mutable_suspicions() = std::move(kept);
    votes = row->suspicions_size();
    needed = std::max(1, std::min(options_.votes_to_kill, voters));
    killed = votes >= needed;
    if (killed) row->set_status(v1::MEMBER_DEAD);
    return true;
  });
  if (!s.ok()) {
    GRANARY_LOG(kWarning) << "silo=" << id_ << " suspect=" << target_id
                          << " could not record a vote: " << s;
    return;
  }
  votes_cast_.fetch_add(1);
  GRANARY_LOG(kWarning) << "silo=" << id_ << " suspect=" << target_id
                        << " votes=" << votes << " needed=" << needed
                        << (killed ? " declared dead" : " suspected");
  if (killed) misses_.erase(target_id);
}

void MembershipAgent::BeginLeave() {
  absl::Status s = WriteSelf(v1::MEMBER_SHUTTING_DOWN);
  if (!s.ok()) {
    GRANARY_LOG(kWarning) << "silo=" << id_
                          << " could not mark itself shutting down: " << s;
  }
}

void MembershipAgent::Leave() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  if (lease_thread_.joinable()) lease_thread_.join();
  absl::Status s = WriteSelf(v1::MEMBER_DEAD);
  if (!s.ok()) {
    GRANARY_LOG(kWarning) << "silo=" << id_ << " could not mark itself dead: "
                          << s;
  }
}

v1::MembershipView MembershipAgent::view() const {
  MutexLock lock(&mu_);
  return view_;
}

}  // namespace granary::silo
