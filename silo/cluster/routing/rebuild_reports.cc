// ClusterRouter's rebuild reports (silo/cluster/routing/cluster_router.h): when
// a view changes the ring, this silo reports the activations it hosts to each
// grain's new directory owner, in parts, retrying until every owner took
// its report or a newer ring replaces it.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/detach.h"
#include "core/log.h"
#include "directory/directory_client.h"
#include "directory/partition.h"
#include "granary/v1/cluster.pb.h"
#include "silo/cluster/routing/cluster_router.h"

namespace granary::silo {

// One rebuild report: this silo's activations, by owner, for one ring.
struct ClusterRouter::Sweep {
  uint64_t ring = 0;
  absl::flat_hash_map<std::string, std::vector<std::vector<v1::DirectoryEntry>>>
      parts;
  int remaining = 0;  // owners not yet done (under the router's mu_)
};

uint64_t ClusterRouter::reported_ring() const {
  MutexLock lock(&mu_);
  return reported_ring_;
}

bool ClusterRouter::WaitUntilReported(const std::function<uint64_t()>& ring,
                                      absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    const uint64_t want = ring();
    // Woken by the report's delivery; the ring itself changes under
    // another lock, so it is read again now and then.
    const absl::Duration slice =
        std::min(give_up - absl::Now(), absl::Milliseconds(50));
    MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout([&] { return reported_ring_ == want; },
                             std::max(slice, absl::ZeroDuration()))) {
      return true;
    }
    if (absl::Now() >= give_up) return false;
  }
}

void ClusterRouter::MaybeSweep() {
  uint64_t ring;
  std::vector<std::string> owners;
  {
    MutexLock lock(&mu_);
    if (closed_ || sweep_due_ == 0) return;
    // Registrations sent under an earlier ring may still win there; wait
    // for them, so the report includes what they activate.
    for (const auto& [r, n] : registering_) {
      if (r != sweep_due_ && n > 0) return;
    }
    ring = sweep_due_;
    owners = std::move(sweep_owners_);
    sweep_due_ = 0;
  }
  RunSweep(ring, std::move(owners));
}

void ClusterRouter::RunSweep(uint64_t ring, std::vector<std::string> owners) {
  if (owner_->ring_fingerprint() != ring) return;  // a newer view sweeps
  auto sweep = std::make_shared<Sweep>();
  sweep->ring = ring;
  absl::flat_hash_map<std::string, std::vector<v1::DirectoryEntry>> by_owner;
  for (const std::string& o : owners) by_owner[o];
  silo_->internals().catalog().ForEach([&](Activation* a) {
    if (a->stateless()) return;  // stateless workers are in no directory
    const std::string o = owner_->OwnerOf(a->id());
    auto it = by_owner.find(o);
    if (it == by_owner.end()) return;  // the ring moved on meanwhile
    v1::DirectoryEntry& e = it->second.emplace_back();
    e.set_type(std::string(a->id().type()));
    e.set_key(a->id().key());
    e.set_silo(self_);
    e.set_activation_id(a->activation_id());
  });
  const size_t batch = static_cast<size_t>(std::max(1, options_.rebuild_batch));
  size_t total = 0;
  for (auto& [o, entries] : by_owner) {
    total += entries.size();
    auto& parts = sweep->parts[o];
    for (size_t i = 0; i < entries.size(); i += batch) {
      parts.emplace_back(
          std::make_move_iterator(entries.begin() + i),
          std::make_move_iterator(entries.begin() +
                                  std::min(entries.size(), i + batch)));
    }
    if (parts.empty()) parts.emplace_back();  // an empty report still counts
  }
  sweep->remaining = static_cast<int>(sweep->parts.size());
  GRANARY_LOG(kInfo) << "silo=" << self_ << " ring=" << ring
                     << " owners=" << sweep->parts.size()
                     << " activations=" << total << " rebuild report";
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    sweep_ = sweep;
    failed_reports_.clear();
    // No owner to tell (every other silo gone): reported as it stands.
    if (sweep->remaining == 0) reported_ring_ = ring;
  }
  for (const auto& [o, parts] : sweep->parts) SendReport(sweep, o, 0);
}

void ClusterRouter::SendReport(std::shared_ptr<Sweep> sweep, std::string owner,
                               int part) {
  const auto& parts = sweep->parts.at(owner);
  v1::RebuildRequest request;
  request.set_ring(sweep->ring);
  request.set_from(self_);
  for (const v1::DirectoryEntry& e : parts[static_cast<size_t>(part)]) {
    *request.add_entries() = e;
  }
  request.set_more(static_cast<size_t>(part) + 1 < parts.size());
  BeginRpc();
  DetachFlat(
      directory_->Rebuild(owner, std::move(request)),
      [this, sweep, owner, part](absl::StatusOr<v1::RebuildReply> r) {
        absl::Cleanup end = [this] { EndRpc(); };
        if (r.ok()) {
          for (const v1::DirectoryEntry& e : r->conflicts()) {
            GRANARY_LOG(kError)
                << "silo=" << self_
                << " grain=" << LogQuote(absl::StrCat(e.type(), "/", e.key()))
                << " activation=" << e.activation_id()
                << " rebuild conflict: another activation is registered";
          }
          bool current;
          {
            MutexLock lock(&mu_);
            current = !closed_ && sweep_ == sweep;
          }
          if (!current) return;  // superseded by a newer ring's report
          if (static_cast<size_t>(part) + 1 < sweep->parts.at(owner).size()) {
            SendReport(sweep, owner, part + 1);
            return;
          }
          MutexLock lock(&mu_);
          if (--sweep->remaining == 0 && sweep_ == sweep) {
            reported_ring_ = sweep->ring;
            ++rebuilds_;
            sweep_.reset();
          }
          return;
        }
        MutexLock lock(&mu_);
        // A newer ring has its own report; this one is moot.
        if (closed_ || sweep_ != sweep) return;
        failed_reports_.emplace_back(owner, part);
        if (!report_retry_scheduled_) {
          report_retry_scheduled_ = true;
          timers_.Schedule(&report_retry_,
                           timers_.clock()->Now() + absl::Milliseconds(100));
        }
      });
}

void ClusterRouter::RetryReports() {
  std::shared_ptr<Sweep> sweep;
  std::vector<std::pair<std::string, int>> failed;
  {
    MutexLock lock(&mu_);
    report_retry_scheduled_ = false;
    if (closed_ || sweep_ == nullptr) return;
    sweep = sweep_;
    failed.swap(failed_reports_);
  }
  for (auto& [owner, part] : failed) SendReport(sweep, owner, part);
}

}  // namespace granary::silo
