// Live migration, the silo that takes an activation over (Runtime::
// AcceptMigration; the silo it leaves: internal::MigrateGrainOut in
// grain.cc, ClusterRouter::MigrateOut).
//
//   source (activation A of G)            target
//   MigrateOnIdle, turns end
//   OnDeactivate; calls now wait at A
//   state + etag + OnDehydrate ------> AcceptMigration: grain made, state
//                                       parsed; activation A' in the catalog,
//                                       holding whatever calls reach it
//                                      directory: G moves from exactly A to
//                                       A' (ClaimMoved), else nothing
//                   OK <-------------- A' runs OnRehydrate, OnActivate
//   A leaves; its waiting calls are
//   routed again: to A'
//
// The directory's compare-and-swap is the fence: the grain lives where its
// entry says, and only one of a race moves it. A target that answers too
// late, or not at all, is never a second activation: the source then
// deactivates, its unregistering does nothing if the entry moved, and a
// moved entry names a live activation.
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/grain_id.h"
#include "core/log.h"
#include "granary/v1/cluster.pb.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

void Runtime::AcceptMigration(
    const v1::MigrationRequest& request,
    std::function<void(absl::StatusOr<v1::MigrationReply>)> done) {
  const v1::DirectoryEntry& from = request.from();
  if (from.type().empty() || from.silo().empty()) {
    done(absl::InvalidArgumentError(
        "a migration names the grain's type, key, silo and activation"));
    return;
  }
  if (absl::Status key = ValidateGrainKey(from.key()); !key.ok()) {
    done(std::move(key));
    return;
  }
  if (router_ == nullptr) {
    done(absl::FailedPreconditionError(
        absl::StrCat("silo ", options_.name,
                     " is not in a cluster: it takes no migrations")));
    return;
  }
  const GrainTypeEntry* type = FindType(from.type());
  if (type == nullptr || !type->hosted ||
      type->info->interface->stateless_worker) {
    done(absl::FailedPreconditionError(
        absl::StrCat("silo ", options_.name, " does not host grain type ",
                     LogQuote(from.type()))));
    return;
  }
  if (stopping()) {
    done(absl::UnavailableError(
        absl::StrCat("silo ", options_.name, " is shutting down")));
    return;
  }
  if (absl::Status may = MayActivate(); !may.ok()) {
    done(std::move(may));
    return;
  }
  // The grain is made here, so a state that does not parse is refused
  // before anything moves.
  std::unique_ptr<Grain> grain;
  try {
    grain = type->factory();
  } catch (...) {
    done(StatusFromException(std::current_exception()));
    return;
  }
  if (grain == nullptr) {
    done(absl::InternalError("grain factory returned null"));
    return;
  }
  if (request.has_state()) {
    if (grain->state_ == nullptr) {
      done(absl::FailedPreconditionError(
          absl::StrCat("grain type ", type->info->interface->type_name,
                       " keeps no persistent state on silo ", options_.name)));
      return;
    }
    if (!grain->state_->ParseFromString(request.state())) {
      done(absl::InvalidArgumentError(
          absl::StrCat("the migrated state of ", from.type(),
                       " does not parse as ", grain->state_->GetTypeName())));
      return;
    }
    grain->state_etag_ = request.etag();
  }
  const GrainId id(type->info->interface->type_name, from.key());
  const uint64_t activation_id = NewActivationId();
  auto incoming = std::make_unique<v1::MigrationRequest>();
  incoming->set_extra(request.extra());
  const bool created = catalog_.CreateIfAbsent(id, [&]() -> Activation* {
    auto* a = new Activation(this, type, id, activation_id);
    a->AwaitMove(std::move(grain), std::move(incoming));
    return a;
  });
  if (!created) {
    done(absl::AbortedError(absl::StrCat(
        id.ToString(), " already has an activation on silo ", options_.name)));
    return;
  }
  v1::DirectoryEntry entry;
  entry.set_type(from.type());
  entry.set_key(from.key());
  entry.set_activation_id(activation_id);
  router_->ClaimMoved(std::move(entry), from,
                      [this, id, activation_id, done = std::move(done)](
                          absl::StatusOr<v1::DirectoryEntry> moved) {
                        const bool ok = moved.ok();
                        catalog_.Find(id, [&](Activation* a) {
                          if (a->activation_id() != activation_id) return;
                          ok ? a->MoveIn() : a->MoveFailed();
                        });
                        if (!ok) {
                          done(moved.status());
                          return;
                        }
                        v1::MigrationReply reply;
                        *reply.mutable_entry() = *std::move(moved);
                        done(std::move(reply));
                      });
}

}  // namespace granary::silo
