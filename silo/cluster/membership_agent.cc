#include "silo/cluster/membership_agent.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "core/callback_task.h"
#include "core/detach.h"
#include "core/log.h"
#include "core/when_all.h"
#include "directory/hash_ring.h"

namespace granary::silo {
namespace {

using storage::IsLive;
// Every silo orders the probe ring alike.
using directory::StableHash;

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
  if (o.heartbeat_period <= absl::ZeroDuration() ||
      o.load_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "heartbeat and load periods must be positive");
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
                                 Transport* transport, v1::Member self,
                                 MembershipOptions options,
                                 std::function<int64_t()> activations)
    : table_(table),
      transport_(transport),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : Clock::System()),
      activations_(std::move(activations)),
      self_(std::move(self)),
      id_(storage::MemberId(self_)),
      timers_(clock_, options.timer_thread),
      sleeper_(&timers_),
      lease_sleeper_(&timers_) {
  if (self_.start_unix_ms() == 0) {
    self_.set_start_unix_ms(absl::ToUnixMillis(Now()));
  }
}

MembershipAgent::~MembershipAgent() { Stop(); }

void MembershipAgent::SetLeaseListener(std::function<void(int64_t)> fn) {
  on_lease_ = std::move(fn);
}

void MembershipAgent::SetDeclaredDeadHandler(std::function<void()> fn) {
  MutexLock lock(&mu_);
  on_dead_ = std::move(fn);
}

absl::Status MembershipAgent::Wait(Task<absl::Status> task) {
  absl::Status out;
  auto keep = [](Task<absl::Status> t, absl::Status* to) -> Task<void> {
    *to = co_await std::move(t);
  };
  absl::Status thrown = keep(std::move(task), &out).Get();
  return thrown.ok() ? out : thrown;
}

Task<absl::Status> MembershipAgent::Update(
    std::string id,
    std::function<bool(const v1::MembershipView&, v1::Member*)> mutate) {
  absl::Status last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    absl::StatusOr<v1::MembershipView> view = co_await table_->Read();
    if (!view.ok()) co_return view.status();
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
      if (id != id_)
        co_return absl::NotFoundError(absl::StrCat("no member ", id));
      row = self_;
    }
    if (!mutate(*view, &row)) co_return absl::OkStatus();  // nothing to change
    absl::StatusOr<int64_t> written =
        co_await table_->Write(row, view->version());
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
      co_return absl::OkStatus();
    }
    last = written.status();
    if (last.code() != absl::StatusCode::kAborted) co_return last;
  }
  co_return last;
}

Task<absl::Status> MembershipAgent::WriteSelf(v1::MemberStatus status) {
  const int64_t now_ms = absl::ToUnixMillis(Now());
  co_return co_await Update(
      id_, [&](const v1::MembershipView&, v1::Member* row) {
        if (row->status() == v1::MEMBER_DEAD && status != v1::MEMBER_DEAD) {
          return false;  // declared dead meanwhile: never revived
        }
        if (row->status() > status) return false;
        const auto suspicions = row->suspicions();
        *row = self_;
        *row->mutable_suspicions() = suspicions;
        row->set_status(status);
        row->set_heartbeat_unix_ms(now_ms);
        if (activations_) row->set_activations(activations_());
        if (load_) *row->mutable_load() = load_();
        return true;
      });
}

Task<absl::Status> MembershipAgent::JoinAsync(absl::Duration timeout) {
  const absl::Time give_up = Now() + timeout;
  absl::Status s;
  for (v1::MemberStatus status : {v1::MEMBER_JOINING, v1::MEMBER_ACTIVE}) {
    while (true) {
      s = co_await WriteSelf(status);
      // The table is not reachable yet, or other silos' writes kept winning
      // the compare-and-swap (many silos joining at once): try again
      // shortly, after a random pause for the latter, so that the writers
      // spread out.
      const bool lost_race = s.code() == absl::StatusCode::kAborted;
      if (s.ok() ||
          (s.code() != absl::StatusCode::kUnavailable && !lost_race) ||
          Now() >= give_up) {
        break;
      }
      thread_local absl::InsecureBitGen gen;
      Sleeper pause(&timers_);
      co_await pause.Until(
          Now() + (lost_race ? absl::Milliseconds(absl::Uniform(gen, 10, 500))
                             : absl::Milliseconds(200)));
    }
    if (!s.ok()) {
      co_return absl::Status(
          s.code(), absl::StrCat("joining the cluster: ", s.message()));
    }
  }
  last_heartbeat_ = Now();
  GRANARY_LOG(kInfo) << "silo=" << id_ << " joined the cluster";
  // Older generations at this silo's endpoint are gone (this process holds
  // the endpoint now): this silo writes them Dead itself, since the table
  // counts no vote from a target's own address.
  std::vector<std::string> older;
  const v1::MembershipView joined = view();
  for (const v1::Member& m : joined.members()) {
    if (IsLive(m) && m.address() == self_.address() &&
        m.generation() < self_.generation()) {
      older.push_back(storage::MemberId(m));
    }
  }
  for (const std::string& old_id : older) {
    // Named first (the GCC 12 hazard of core/task.h).
    std::function<bool(const v1::MembershipView&, v1::Member*)> retire =
        [](const v1::MembershipView&, v1::Member* row) {
          if (!IsLive(*row)) return false;
          row->set_status(v1::MEMBER_DEAD);
          return true;
        };
    absl::Status retired = co_await Update(old_id, std::move(retire));
    GRANARY_LOG(kInfo) << "silo=" << id_ << " retired its older generation "
                       << old_id << ": " << retired;
  }
  co_return absl::OkStatus();
}

absl::Status MembershipAgent::StartTimers() {
  if (timers_started_) return absl::OkStatus();
  GRANARY_RETURN_IF_ERROR(timers_.Start());
  timers_started_ = true;
  return absl::OkStatus();
}

absl::Status MembershipAgent::Join(absl::Duration timeout) {
  GRANARY_RETURN_IF_ERROR(StartTimers());
  return Wait(JoinAsync(timeout));
}

absl::Status MembershipAgent::Start() {
  GRANARY_RETURN_IF_ERROR(StartTimers());
  started_ = true;
  Detach(Rounds(), [this](absl::Status) { rounds_done_.Notify(); });
  if (options_.lease > absl::ZeroDuration() && on_lease_) {
    Detach(LeaseRounds(), [this](absl::Status) { lease_done_.Notify(); });
  } else {
    lease_done_.Notify();
  }
  return absl::OkStatus();
}

void MembershipAgent::Stop() {
  sleeper_.Wake();
  lease_sleeper_.Wake();
  if (started_) {
    rounds_done_.WaitForNotification();
    lease_done_.WaitForNotification();
    started_ = false;
  }
  timers_.Stop();
}

Task<void> MembershipAgent::LeaseRounds() {
  const absl::Duration period = options_.lease / 3;
  while (!declared_dead()) {
    const int64_t sent = ClockNanos(*clock_);
    // This silo's row alone: the views come from the table's watch.
    absl::StatusOr<v1::Member> row = co_await table_->ReadRow(self_);
    // The table showed this silo alive at some moment after `sent`.
    if (row.ok() && storage::IsLive(*row)) {
      const int64_t until = sent + absl::ToInt64Nanoseconds(options_.lease);
      lease_until_ns_.store(until);
      on_lease_(until);
    } else if (row.ok() || row.status().code() == absl::StatusCode::kNotFound) {
      // Dead (or its row gone): the whole view, which says so to the
      // rounds and the listeners.
      co_await Refresh();
    }
    if (!co_await lease_sleeper_.Until(Now() + period)) co_return;
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
  bool newly_dead = false;
  bool same = false;
  {
    MutexLock lock(&mu_);
    if (view.version() < view_.version()) return;
    viewed_at_ = Now();
    // At the same version: the same rows, perhaps with newer heartbeats and
    // loads (a table that records them without a new version), which only
    // the load listener hears of.
    same = view.version() == view_.version();
    view_ = view;
    for (const v1::Member& m : view_.members()) {
      if (!same && storage::MemberId(m) == id_ &&
          m.status() == v1::MEMBER_DEAD && !declared_dead_) {
        declared_dead_ = true;
        newly_dead = true;
      }
    }
  }
  // The rounds end at once (and run the declared-dead handler) rather than
  // at their next wake-up.
  if (newly_dead) sleeper_.Wake();
  MutexLock lock(&listener_mu_);
  if (same) {
    if (load_listener_ && view.version() == notified_version_) {
      load_listener_(view);
    }
  } else if (listener_ && view.version() > notified_version_) {
    notified_version_ = view.version();
    listener_(view);
  }
}

void MembershipAgent::SetLoadListener(
    std::function<void(const v1::MembershipView&)> fn) {
  MutexLock lock(&listener_mu_);
  load_listener_ = std::move(fn);
}

void MembershipAgent::SetLoadSource(std::function<v1::SiloLoad()> fn) {
  load_ = std::move(fn);
}

Task<void> MembershipAgent::Refresh() {
  absl::StatusOr<v1::MembershipView> view = co_await table_->Read();
  if (view.ok()) {
    OnView(*view);
  } else {
    GRANARY_LOG(kWarning) << "silo=" << id_
                          << " cannot read the membership table: "
                          << view.status();
  }
}

Task<void> MembershipAgent::Rounds() {
  absl::Time next = Now();
  while (true) {
    next += options_.probe_interval;
    if (!co_await sleeper_.Until(next)) {
      if (declared_dead()) break;  // woken by the view that says so
      co_return;                   // stopped
    }
    round_lag_ = Now() - next;
    if (!co_await Round()) break;
    // A round that ran late moves the schedule, before the round is counted:
    // whoever waits for the count and then moves a fake clock must find the
    // next round due at the new time, not one interval past it.
    if (next < Now()) next = Now();
    rounds_.fetch_add(1);
  }
  // Never probe or vote once declared dead.
  GRANARY_LOG(kError) << "silo=" << id_
                      << " the cluster declared this silo dead";
  std::function<void()> on_dead;
  {
    MutexLock lock(&mu_);
    on_dead = on_dead_;
  }
  if (on_dead) on_dead();
}

Task<bool> MembershipAgent::Round() {
  absl::Time viewed_at;
  {
    MutexLock lock(&mu_);
    viewed_at = viewed_at_;
  }
  if (!declared_dead() && Now() - viewed_at >= options_.refresh_period) {
    co_await Refresh();
  }
  if (declared_dead()) co_return false;
  const absl::Duration heartbeat_period =
      heartbeat_write_ && load_
          ? std::min(options_.heartbeat_period, options_.load_period)
          : options_.heartbeat_period;
  if (Now() - last_heartbeat_ >= heartbeat_period) {
    last_heartbeat_ = Now();
    const int64_t now_ms = absl::ToUnixMillis(Now());
    absl::Status beat = absl::UnimplementedError("");
    if (heartbeat_write_) {
      // A write of the row alone: the version stays, so nobody re-rings.
      v1::Member me = self_;
      me.set_heartbeat_unix_ms(now_ms);
      if (activations_) me.set_activations(activations_());
      if (load_) *me.mutable_load() = load_();
      beat = co_await table_->Heartbeat(std::move(me));
      if (beat.code() == absl::StatusCode::kUnimplemented) {
        heartbeat_write_ = false;
      }
    }
    if (beat.code() == absl::StatusCode::kUnimplemented) {
      (void)co_await Update(id_,
                            [&](const v1::MembershipView&, v1::Member* row) {
                              if (!IsLive(*row)) return false;
                              row->set_heartbeat_unix_ms(now_ms);
                              if (activations_)
                                row->set_activations(activations_());
                              if (load_) *row->mutable_load() = load_();
                              return true;
                            });
    }
  }
  co_await ProbeRound();
  co_return true;
}

void MembershipAgent::BeginLeave() {
  absl::Status s = Wait(WriteSelf(v1::MEMBER_SHUTTING_DOWN));
  if (!s.ok()) {
    GRANARY_LOG(kWarning) << "silo=" << id_
                          << " could not mark itself shutting down: " << s;
  }
}

void MembershipAgent::Leave() {
  sleeper_.Wake();
  lease_sleeper_.Wake();
  if (started_) {
    rounds_done_.WaitForNotification();
    lease_done_.WaitForNotification();
    started_ = false;
  }
  absl::Status s = Wait(WriteSelf(v1::MEMBER_DEAD));
  if (!s.ok()) {
    GRANARY_LOG(kWarning) << "silo=" << id_
                          << " could not mark itself dead: " << s;
  }
  timers_.Stop();
}

v1::MembershipView MembershipAgent::view() const {
  MutexLock lock(&mu_);
  return view_;
}

}  // namespace granary::silo
