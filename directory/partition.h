// File: directory/partition.h
// -----------------------------------------------------------------------------
// The distributed grain directory (DESIGN.md): every grain id has one owner,
// the silo consistent hashing over the Active silos of the view picks
// (directory/hash_ring.h). This is one silo's partition: the authoritative
// entries of the grains it owns. Register-if-absent is atomic here, so of two
// silos racing to activate a grain exactly one wins and the other is told
// where it lives.
//
//   DirectoryPartition partition(my_id);     // this silo's partition
//   partition.OnView(view);                  // ring, purge of dead silos
//   DirectoryService service(&partition);    // serve it (directory_service.h)
//   DirectoryClient directory(&partition);   // ask whichever silo owns an id
//
// Requests carry the caller's view version; an owner refuses a grain it does
// not own under its view (FAILED_PRECONDITION) and a caller whose view is
// newer than its own (UNAVAILABLE), so callers retry after the views agree.
// Only Active silos may be registered as hosts, and a silo may replace only
// its own entries.
//
// Hand-off and rebuild of a range when the ring changes:
//
//        view changes the ring
//   (1) ----------------------> Rebuilding: grains this silo owned under the
//                               ring before (stable ring) are answered; any
//                               other "not found" is UNAVAILABLE
//        every Active and ShuttingDown silo sent its Rebuild report
//   (2) ----------------------> Stable: every range is answered
//        a silo dies: its entries and ranges wait out its grace (the lease)
//   (3) ----------------------> Grace: the dead silo's ranges are answered
//                               as under the ring before its death
//
// Threading: thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/sync.h"
#include "directory/hash_ring.h"
#include "directory/local_grain_directory.h"
#include "granary/v1/cluster.pb.h"

namespace granary::directory {

// Identifies a view's ring for rebuild reports: the same in every process
// for the same members and statuses, and never the same for two different
// moments of a cluster (see RebuildRequest.ring).
uint64_t RingIdentity(const v1::MembershipView& view);

class DirectoryPartition {
 public:
  // `clock` times the dead silos' grace (null: the monotonic clock; a test
  // passes a FakeClock and moves it past the grace).
  explicit DirectoryPartition(std::string self_id = "",
                              const Clock* clock = nullptr);
  // How long the entries of a silo declared dead are kept (and the ranges
  // it owned stay unanswered) after this silo learns of the death: the
  // membership lease, during which a silo cut off from the others but not
  // from the table may still run grain code. Zero: dropped at once.
  void set_dead_grace(absl::Duration grace) {
    MutexLock lock(&mu_);
    dead_grace_ns_ = absl::ToInt64Nanoseconds(grace);
  }
  // This silo's id, when it is known only after the endpoint is bound; set
  // before serving (until then, and until the first view, every request is
  // answered UNAVAILABLE).
  void set_self_id(std::string id) {
    MutexLock lock(&mu_);
    self_id_ = std::move(id);
  }

  // Adopts `view` (ignored when older than the current one): the ring over
  // its Active silos, and the entries of its Dead silos dropped. Entries
  // this silo no longer owns are dropped too (their new owner rebuilds them
  // from the silos hosting the activations).
  void OnView(const v1::MembershipView& view);

  absl::StatusOr<v1::DirectoryReply> Register(const v1::DirectoryRequest& r);
  absl::StatusOr<v1::DirectoryReply> Lookup(const v1::DirectoryRequest& r);
  absl::StatusOr<v1::DirectoryReply> Unregister(const v1::DirectoryRequest& r);
  // A silo's report of its activations this silo owns under the request's
  // ring (see RebuildRequest). Once every Active and ShuttingDown silo
  // reported,
  // grains of ranges this silo gained are answered again.
  absl::StatusOr<v1::RebuildReply> Rebuild(const v1::RebuildRequest& r);
  // True while some not-found answer could be wrong because a range's
  // entries are not all rebuilt yet (such answers are UNAVAILABLE).
  bool rebuilding() const;
  // The RingIdentity of the current ring (0 before the first view).
  uint64_t ring_fingerprint() const;

  // The owner of `id` under the current view ("" with no Active silo).
  std::string OwnerOf(const GrainId& id) const;
  int64_t view_version() const;
  const std::string& self_id() const { return self_id_; }
  size_t size() const { return partition_.size(); }

 private:
  // OK when this silo may answer for the request's grain.
  absl::Status Check(const v1::DirectoryRequest& r, GrainId* id) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Ends the rebuild once every host has reported.
  void MaybeRebuilt() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // UNAVAILABLE when "no entry for `id`" may be a lost entry not rebuilt
  // yet.
  absl::Status CheckRebuilt(const GrainId& id) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Now in nanoseconds on clock_ (MonoNanos without one).
  int64_t NowNanos() const {
    return clock_ == nullptr ? MonoNanos() : absl::ToUnixNanos(clock_->Now());
  }
  const Clock* const clock_;
  std::string self_id_;
  // Held shared by requests from their ownership check to their change of
  // the partition, exclusively by OnView.
  mutable Mutex mu_;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const HashRing> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t ring_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<std::string> active_ ABSL_GUARDED_BY(mu_);
  // Active and ShuttingDown silos: those that may report activations.
  absl::flat_hash_set<std::string> hosts_ ABSL_GUARDED_BY(mu_);
  // The ring whose entries are all here: ring_ itself once every Active
  // silo reported; while a rebuild runs, the ring before it (grains this
  // silo owned under both are answered), or null when rings changed again
  // mid-rebuild (nothing not found is answered until it completes).
  std::shared_ptr<const HashRing> stable_ring_ ABSL_GUARDED_BY(mu_);
  // Silos that reported for ring_.
  absl::flat_hash_set<std::string> reported_ ABSL_GUARDED_BY(mu_);
  // Dead silos within their grace: id -> when (NowNanos) their entries go.
  int64_t dead_grace_ns_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int64_t> dead_until_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> dead_seen_ ABSL_GUARDED_BY(mu_);
  // The end of the latest grace, and the ring before the death that
  // started it (null: two graces overlapped).
  int64_t grace_until_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const HashRing> grace_ring_ ABSL_GUARDED_BY(mu_);
  // Drops the entries of dead silos whose grace is over.
  void PurgeDead(int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The entry of `id`, unless it names a dead silo whose grace is over (then
  // it is removed and NOT_FOUND returned).
  absl::StatusOr<ActivationAddress> LiveEntry(const GrainId& id) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Internally synchronized; lookups may drop entries of dead silos.
  mutable LocalGrainDirectory partition_;
};

}  // namespace granary::directory
