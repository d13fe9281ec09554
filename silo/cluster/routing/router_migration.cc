// ClusterRouter (silo/cluster/routing/cluster_router.h): the cluster's side
// of live migration (silo/runtime/migration.cc). On the silo an activation
// leaves, MigrateOut picks the silo that takes it and sends it there; on
// that silo, ClaimMoved moves the grain's directory entry from the old
// activation to the new one, a compare-and-swap at the grain's owner.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "directory/directory_client.h"
#include "granary/v1/cluster.pb.h"
#include "silo/cluster/routing/cluster_router.h"
#include "silo/cluster/transport.h"

namespace granary::silo {

std::string ClusterRouter::MigrationTarget(const GrainId& id) {
  const InterfaceInfo* iface = silo_->FindInterface(id.type());
  const uint32_t version = iface != nullptr ? iface->version : 1;
  MutexLock lock(&mu_);
  const Labels& filter = FilterLocked(id.type());
  PlacementCandidate* best = nullptr;
  for (PlacementCandidate& c : active_) {
    if (c.id == self_ || !c.CanHost(id.type(), version, filter)) continue;
    if (best == nullptr ||
        c.activations + c.placed < best->activations + best->placed) {
      best = &c;
    }
  }
  if (best == nullptr) return "";
  ++best->placed;  // counted until its next report, as placements are
  return best->id;
}

void ClusterRouter::MigrateOut(v1::MigrationRequest request, std::string to,
                               std::function<void(absl::Status)> done) {
  const GrainId id(InternTypeName(request.from().type()), request.from().key());
  if (to.empty()) to = MigrationTarget(id);
  if (to.empty()) {
    done(absl::FailedPreconditionError(
        absl::StrCat("no other Active silo can host ", id.ToString())));
    return;
  }
  {
    MutexLock lock(&mu_);
    if (closed_) {
      done(absl::UnavailableError("the router is stopping"));
      return;
    }
    request.mutable_from()->set_silo(self_);
    request.set_view_version(view_version_);
  }
  const uint64_t from_activation = request.from().activation_id();
  BeginRpc();  // the router outlives the answer
  transport_->SendMigration(
      to, std::move(request), options_.give_up_after,
      [this, id, from_activation,
       done = std::move(done)](absl::StatusOr<v1::MigrationReply> r) {
        if (r.ok()) {
          migrated_out_.fetch_add(1, std::memory_order_relaxed);
          // The activation's departure confirms the move at the grain's
          // owner then, rather than removing the entry (SendUnregister).
          MutexLock lock(&mu_);
          moved_[id] = {from_activation, r->entry()};
        }
        done(r.status());
        EndRpc();
      });
}

void ClusterRouter::ClaimMoved(
    v1::DirectoryEntry entry, v1::DirectoryEntry from,
    std::function<void(absl::StatusOr<v1::DirectoryEntry>)> done) {
  entry.set_silo(self_);
  BeginRpc();
  DetachFlat(directory_->Move(entry, std::move(from)),
             [this, entry,
              done = std::move(done)](absl::StatusOr<v1::DirectoryReply> r) {
               if (!r.ok()) {
                 done(r.status());
               } else if (r->entry().silo() != entry.silo() ||
                          r->entry().activation_id() != entry.activation_id()) {
                 done(absl::AbortedError(
                     absl::StrCat("the directory entry of ", entry.type(),
                                  " moved elsewhere meanwhile (now on silo ",
                                  r->entry().silo(), ")")));
               } else {
                 migrated_in_.fetch_add(1, std::memory_order_relaxed);
                 done(entry);
               }
               EndRpc();
             });
}

}  // namespace granary::silo
