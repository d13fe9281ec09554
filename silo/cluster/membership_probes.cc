// MembershipAgent (silo/cluster/membership_agent.h): the probe rounds,
// the local health score that excuses a late prober's timeouts, and the
// suspicion votes that declare a silo dead.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/callback_task.h"
#include "core/log.h"
#include "core/when_all.h"
#include "directory/hash_ring.h"
#include "silo/cluster/membership_agent.h"

namespace granary::silo {
namespace {

using storage::IsLive;
// Every silo orders the probe ring alike.
using directory::StableHash;

}  // namespace

Task<void> MembershipAgent::ProbeRound() {
  if (ClockNanos(*clock_) > lease_until_ns_.load()) {
    // Without a lease this silo cannot tell a dead peer from its own lost
    // table (every peer looks unhealthy while the table is unreachable):
    // it neither probes nor votes, and starts counting afresh.
    misses_.clear();
    co_return;
  }
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
  // The `probe_fanout` live silos after this one on the ring, and every
  // live silo whose heartbeat is stale (up to kMaxStaleProbes, the stalest
  // first): rows that stopped beating (a crash of many silos at once, rows
  // a compromised member added) get the votes of every silo, not only of
  // their ring neighbours, which may be just as silent.
  std::vector<v1::Member> chosen;
  absl::flat_hash_set<std::string> targets;
  for (const v1::Member& target : live) {
    if (chosen.size() >= static_cast<size_t>(options_.probe_fanout)) break;
    const std::string target_id = storage::MemberId(target);
    // (Older generations at this address are retired at join, not voted.)
    if (target_id == id_ || target.address() == self_.address()) continue;
    targets.insert(target_id);
    chosen.push_back(target);
  }
  const int64_t stale_before =
      absl::ToUnixMillis(Now() - options_.vote_rules().heartbeat_stale);
  std::vector<const v1::Member*> stale;
  for (const v1::Member& m : live) {
    if (m.heartbeat_unix_ms() < stale_before &&
        !targets.contains(storage::MemberId(m)) &&
        m.address() != self_.address()) {
      stale.push_back(&m);
    }
  }
  std::sort(
      stale.begin(), stale.end(), [](const v1::Member* a, const v1::Member* b) {
        return std::make_pair(a->heartbeat_unix_ms(), storage::MemberId(*a)) <
               std::make_pair(b->heartbeat_unix_ms(), storage::MemberId(*b));
      });
  if (stale.size() > kMaxStaleProbes) stale.resize(kMaxStaleProbes);
  for (const v1::Member* m : stale) {
    targets.insert(storage::MemberId(*m));
    chosen.push_back(*m);
  }
  // All at once: a round takes one probe timeout, however many are silent.
  const int health = health_.load();
  const absl::Duration timeout = options_.probe_timeout * (1 + health);
  std::vector<Task<ProbeResult>> probes;
  probes.reserve(chosen.size());
  for (const v1::Member& target : chosen) {
    probes.push_back(Probe(target, timeout));
  }
  const std::vector<absl::StatusOr<ProbeResult>> results =
      co_await WhenAll(std::move(probes));
  // This silo is itself starved when its round started late or an answer
  // took more than half the time it was given.
  absl::Duration slowest;
  for (const absl::StatusOr<ProbeResult>& r : results) {
    if (r.ok() && r->outcome == Outcome::kAnswered) {
      slowest = std::max(slowest, r->took);
    }
  }
  std::optional<double> pressure;
  if (options_.cpu_pressure) pressure = options_.cpu_pressure();
  const bool slow = round_lag_ > options_.probe_timeout / 2 ||
                    slowest > timeout / 2 ||
                    pressure.value_or(0) >= kStarvedCpuPressure;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const v1::Member& target = chosen[i];
    const std::string target_id = storage::MemberId(target);
    const Outcome outcome =
        results[i].ok() ? results[i]->outcome : Outcome::kRefused;
    if (outcome == Outcome::kAnswered) {
      misses_.erase(target_id);
      excused_.erase(target_id);
      continue;
    }
    if (outcome == Outcome::kTimedOut && (health > 0 || slow) &&
        excused_[target_id] < kMaxExcusedTimeouts) {
      ++excused_[target_id];
      probes_excused_.fetch_add(1);
      continue;
    }
    probes_missed_.fetch_add(1);
    if (++misses_[target_id] >= options_.missed_probes &&
        target.address() != options_.table_host) {
      co_await Vote(target_id,
                    results[i].ok() ? results[i]->why : results[i].status());
    }
  }
  UpdateHealth(slow, round_lag_, slowest, pressure.value_or(0));
  // Misses count only while consecutive and while the silo is a target.
  for (auto* counts : {&misses_, &excused_}) {
    for (auto it = counts->begin(); it != counts->end();) {
      if (!targets.contains(it->first)) {
        counts->erase(it++);
      } else {
        ++it;
      }
    }
  }
}

Task<MembershipAgent::ProbeResult> MembershipAgent::Probe(
    const v1::Member& target, absl::Duration timeout) {
  if (transport_ == nullptr) co_return ProbeResult{};
  v1::ProbeRequest request;
  request.set_from(id_);
  const absl::Time sent = Now();
  absl::StatusOr<v1::ProbeReply> reply =
      co_await FromCallback<absl::StatusOr<v1::ProbeReply>>(
          [&](std::function<void(absl::StatusOr<v1::ProbeReply>)> done) {
            transport_->Probe(target.address(), request, timeout,
                              std::move(done));
          });
  ProbeResult result;
  result.took = Now() - sent;
  if (reply.ok()) {
    // Another generation answering on that address means this one is gone.
    result.outcome = reply->id() == storage::MemberId(target)
                         ? Outcome::kAnswered
                         : Outcome::kRefused;
    if (result.outcome == Outcome::kRefused) {
      result.why = absl::NotFoundError(
          absl::StrCat("silo ", reply->id(), " answers at its address"));
    }
  } else {
    result.why = reply.status();
    result.outcome =
        reply.status().code() == absl::StatusCode::kDeadlineExceeded
            ? Outcome::kTimedOut
            : Outcome::kRefused;
  }
  co_return result;
}

void MembershipAgent::UpdateHealth(bool slow, absl::Duration lag,
                                   absl::Duration slowest, double pressure) {
  const int before = health_.load();
  const int after =
      slow ? std::min(before + 1, kMaxHealthScore) : std::max(before - 1, 0);
  health_.store(after);
  if (before == 0 && after > 0) {
    GRANARY_LOG(kWarning)
        << "silo=" << id_ << " is running late (round "
        << absl::FormatDuration(lag) << " late, slowest probe answer "
        << absl::FormatDuration(slowest) << ", CPU pressure " << pressure
        << "%): probes that time out are not counted as misses (up to "
        << kMaxExcusedTimeouts << " in a row per silo), and wait longer, "
        << "until it catches up";
  } else if (before > 0 && after == 0) {
    GRANARY_LOG(kInfo) << "silo=" << id_
                       << " caught up: probes that time out count again";
  }
}

Task<void> MembershipAgent::Vote(std::string target_id, absl::Status why) {
  int votes = 0, needed = 0;
  bool killed = false;
  absl::Status s = co_await Update(
      target_id, [&](const v1::MembershipView& view, v1::Member* row) {
        if (row->status() == v1::MEMBER_DEAD) return false;
        const storage::VoteRules rules = options_.vote_rules();
        const int64_t now = absl::ToUnixMillis(Now());
        // The votes that still count stay, one per silo address (a restarted
        // silo's old votes do not add to its new ones); this silo's own vote
        // is cast anew. The table checks the same rules (storage::CheckVotes).
        google::protobuf::RepeatedPtrField<v1::Suspicion> kept;
        absl::flat_hash_set<std::string> addresses = {self_.address()};
        for (const v1::Suspicion& v : row->suspicions()) {
          if (v.by() == id_ ||
              !storage::VoteCounts(view, *row, v, rules, now)) {
            continue;
          }
          std::string address;
          for (const v1::Member& m : view.members()) {
            if (storage::MemberId(m) == v.by()) address = m.address();
          }
          if (!addresses.insert(address).second) continue;
          *kept.Add() = v;
        }
        v1::Suspicion* mine = kept.Add();
        mine->set_by(id_);
        mine->set_at_unix_ms(now);
        *row->mutable_suspicions() = std::move(kept);
        votes = storage::CountVotes(view, *row, rules, now);
        needed = storage::VotesNeeded(view, *row, rules, now);
        killed = votes >= needed;
        if (killed) row->set_status(v1::MEMBER_DEAD);
        return true;
      });
  if (!s.ok()) {
    GRANARY_LOG(kWarning) << "silo=" << id_ << " suspect=" << target_id
                          << " could not record a vote: " << s;
    co_return;
  }
  votes_cast_.fetch_add(1);
  GRANARY_LOG(kWarning) << "silo=" << id_ << " suspect=" << target_id
                        << " votes=" << votes << " needed=" << needed
                        << (killed ? " declared dead" : " suspected")
                        << " (last probe: " << why << ")";
  if (killed) misses_.erase(target_id);
}

}  // namespace granary::silo
