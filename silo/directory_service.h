// File: silo/directory_service.h
// -----------------------------------------------------------------------------
// The distributed grain directory (DESIGN.md): every grain id has one owner,
// the silo consistent hashing over the Active silos of the view picks
// (directory/hash_ring.h). The owner holds the authoritative entry in its
// partition; register-if-absent is atomic there, so of two silos racing to
// activate a grain exactly one wins and the other is told where it lives.
//
//   DirectoryOwner owner(my_id);             // this silo's partition
//   owner.OnView(view);                      // ring, purge of dead silos
//   DirectoryService service(&owner);        // serve it on the silo endpoint
//   ClusterDirectory directory(&owner);      // ask whichever silo owns an id
//   directory.OnView(view);
//   directory.Register(entry, [](absl::StatusOr<v1::DirectoryReply> r) {...});
//
// Requests carry the caller's view version; an owner refuses a grain it does
// not own under its view (FAILED_PRECONDITION) and a caller whose view is
// newer than its own (UNAVAILABLE), so callers retry after the views agree.
// Only Active silos may be registered as hosts, and a silo may replace only
// its own entries.
//
// Threading: thread-safe. ClusterDirectory completes on gRPC's threads (or
// inline for grains this silo owns); completions must not block.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/sync.h"
#include "directory/hash_ring.h"
#include "directory/local_grain_directory.h"
#include "granary/v1/cluster.grpc.pb.h"

namespace granary::silo {

// Identifies a view's ring for rebuild reports: the same in every process
// for the same members and statuses, and never the same for two different
// moments of a cluster (see RebuildRequest.ring).
uint64_t RingIdentity(const v1::MembershipView& view);

class DirectoryOwner {
 public:
  explicit DirectoryOwner(std::string self_id = "");
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

  std::string self_id_;
  // Held shared by requests from their ownership check to their change of
  // the partition, exclusively by OnView.
  mutable Mutex mu_;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const directory::HashRing> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t ring_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<std::string> active_ ABSL_GUARDED_BY(mu_);
  // Active and ShuttingDown silos: those that may report activations.
  absl::flat_hash_set<std::string> hosts_ ABSL_GUARDED_BY(mu_);
  // The ring whose entries are all here: ring_ itself once every Active
  // silo reported; while a rebuild runs, the ring before it (grains this
  // silo owned under both are answered), or null when rings changed again
  // mid-rebuild (nothing not found is answered until it completes).
  std::shared_ptr<const directory::HashRing> stable_ring_ ABSL_GUARDED_BY(mu_);
  // Silos that reported for ring_.
  absl::flat_hash_set<std::string> reported_ ABSL_GUARDED_BY(mu_);
  // Dead silos within their grace: id -> when (MonoNanos) their entries go.
  int64_t dead_grace_ns_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int64_t> dead_until_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> dead_seen_ ABSL_GUARDED_BY(mu_);
  // The end of the latest grace, and the ring before the death that
  // started it (null: two graces overlapped).
  int64_t grace_until_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const directory::HashRing> grace_ring_ ABSL_GUARDED_BY(mu_);
  // Drops the entries of dead silos whose grace is over.
  void PurgeDead(int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The entry of `id`, unless it names a dead silo whose grace is over (then
  // it is removed and NOT_FOUND returned).
  absl::StatusOr<directory::ActivationAddress> LiveEntry(const GrainId& id)
      const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Internally synchronized; lookups may drop entries of dead silos.
  mutable directory::LocalGrainDirectory partition_;
};

class DirectoryService final : public v1::Directory::CallbackService {
 public:
  explicit DirectoryService(DirectoryOwner* owner) : owner_(owner) {}
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::DirectoryRequest* request,
                                     v1::DirectoryReply* reply) override;
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* context,
                                   const v1::DirectoryRequest* request,
                                   v1::DirectoryReply* reply) override;
  grpc::ServerUnaryReactor* Unregister(grpc::CallbackServerContext* context,
                                       const v1::DirectoryRequest* request,
                                       v1::DirectoryReply* reply) override;
  grpc::ServerUnaryReactor* Rebuild(grpc::CallbackServerContext* context,
                                    const v1::RebuildRequest* request,
                                    v1::RebuildReply* reply) override;

 private:
  DirectoryOwner* const owner_;
};

// Asks the owner of each grain: this silo's own partition directly, other
// silos over their Directory service.
class ClusterDirectory {
 public:
  using Done = std::function<void(absl::StatusOr<v1::DirectoryReply>)>;

  explicit ClusterDirectory(DirectoryOwner* local,
                            absl::Duration timeout = absl::Seconds(5));

  // Learns the silos' addresses (ids -> silo endpoints) of `view`.
  void OnView(const v1::MembershipView& view);

  void Register(const v1::DirectoryEntry& entry, Done done,
                const v1::DirectoryEntry* replace = nullptr);
  void Lookup(const GrainId& id, Done done);
  void Unregister(const v1::DirectoryEntry& entry, Done done);
  // Sends a rebuild report to silo `owner` (this silo's own partition
  // directly).
  using RebuildDone = std::function<void(absl::StatusOr<v1::RebuildReply>)>;
  void Rebuild(const std::string& owner, v1::RebuildRequest request,
               RebuildDone done);

 private:
  enum class Op { kRegister, kLookup, kUnregister };
  void Send(Op op, v1::DirectoryRequest request, Done done);
  std::shared_ptr<v1::Directory::Stub> StubFor(const std::string& silo_id);

  DirectoryOwner* const local_;
  const absl::Duration timeout_;
  Mutex mu_;
  absl::flat_hash_map<std::string, std::string> addresses_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<v1::Directory::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::silo
