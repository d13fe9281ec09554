#include "silo/directory_service.h"

#include "client/grpc_callback_queue.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "grpcpp/grpcpp.h"
#include "silo/async_unary.h"
#include "silo/grpc_status.h"
#include "silo/silo_metrics.h"
#include "storage/membership_table.h"

namespace granary::silo {
namespace {

constexpr size_t kMaxTypeBytes = 256;

v1::DirectoryEntry ToEntry(const GrainId& id,
                           const directory::ActivationAddress& a) {
  v1::DirectoryEntry e;
  e.set_type(std::string(id.type()));
  e.set_key(id.key());
  e.set_silo(a.silo);
  e.set_activation_id(a.activation_id);
  return e;
}

directory::ActivationAddress ToAddress(const v1::DirectoryEntry& e) {
  return directory::ActivationAddress{e.silo(), e.activation_id()};
}

}  // namespace

uint64_t RingIdentity(const v1::MembershipView& view) {
  // Statuses only move forward and a member never returns once Dead, so
  // this set of (member, status) never recurs: neither does the identity,
  // even when the Active silos come back to an earlier set.
  std::vector<std::string> rows;
  for (const v1::Member& m : view.members()) {
    if (m.status() == v1::MEMBER_ACTIVE ||
        m.status() == v1::MEMBER_SHUTTING_DOWN ||
        m.status() == v1::MEMBER_DEAD) {
      rows.push_back(absl::StrCat(storage::MemberId(m), " ", m.status()));
    }
  }
  std::sort(rows.begin(), rows.end());
  return directory::StableHash(absl::StrJoin(rows, "\n"));
}

DirectoryOwner::DirectoryOwner(std::string self_id)
    : self_id_(std::move(self_id)),
      ring_(std::make_shared<directory::HashRing>(std::vector<std::string>{})) {}

void DirectoryOwner::OnView(const v1::MembershipView& view) {
  std::vector<std::string> active;
  std::vector<std::string> dead;
  absl::flat_hash_set<std::string> active_set;
  absl::flat_hash_set<std::string> hosts;
  for (const v1::Member& m : view.members()) {
    if (m.status() == v1::MEMBER_ACTIVE) {
      active.push_back(storage::MemberId(m));
      active_set.insert(active.back());
    }
    if (m.status() == v1::MEMBER_ACTIVE ||
        m.status() == v1::MEMBER_SHUTTING_DOWN) {
      hosts.insert(storage::MemberId(m));
    }
    if (m.status() == v1::MEMBER_DEAD) dead.push_back(storage::MemberId(m));
  }
  auto ring = std::make_shared<const directory::HashRing>(std::move(active));
  const uint64_t identity = RingIdentity(view);
  // Exclusive: no request is between its ownership check and its change of
  // the partition while ownership moves.
  MutexLock lock(&mu_);
  if (view.version() < version_) return;
  version_ = view.version();
  hosts_ = std::move(hosts);
  active_ = std::move(active_set);
  // Silos newly dead keep their entries through the grace (see
  // set_dead_grace); those whose grace is over lose them.
  const int64_t now = MonoNanos();
  for (const std::string& silo : dead) {
    if (!dead_seen_.insert(silo).second) continue;
    if (dead_grace_ns_ > 0) {
      dead_until_[silo] = now + dead_grace_ns_;
      // Ranges owned under the ring before the death are answered; with a
      // grace already running, nothing not found is.
      grace_ring_ = now < grace_until_ ? nullptr : ring_;
      grace_until_ = std::max(grace_until_, now + dead_grace_ns_);
    } else {
      partition_.RemoveSilo(silo);
    }
  }
  PurgeDead(now);
  if (identity == ring_id_) {
    // The same silos and statuses: entries and the rebuild state stay as
    // they are, but a silo that left may have been the last one to report.
    MaybeRebuilt();
    return;
  }
  // A new ring: what it moved here is answered once every Active silo has
  // reported its activations for it (Rebuild).
  if (stable_ring_ != ring_) stable_ring_ = nullptr;  // changed mid-rebuild
  else stable_ring_ = ring_;
  reported_.clear();
  ring_ = ring;
  ring_id_ = identity;
  (void)partition_.Extract([&](const GrainId& id) {
    return ring->OwnerOf(id) != self_id_;
  });
}

void DirectoryOwner::PurgeDead(int64_t now_ns) {
  for (auto it = dead_until_.begin(); it != dead_until_.end();) {
    if (it->second <= now_ns) {
      partition_.RemoveSilo(it->first);
      dead_until_.erase(it++);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<directory::ActivationAddress> DirectoryOwner::LiveEntry(
    const GrainId& id) const {
  absl::StatusOr<directory::ActivationAddress> found = partition_.Lookup(id);
  if (!found.ok()) return found;
  auto dead = dead_until_.find(found->silo);
  if (dead != dead_until_.end() && dead->second <= MonoNanos()) {
    // Its silo's grace is over: the entry goes (the partition has its own
    // lock; the next view drops the silo's other entries).
    (void)partition_.Unregister(id, *found);
    return absl::NotFoundError("the grain's silo is dead");
  }
  return found;
}

void DirectoryOwner::MaybeRebuilt() {
  if (stable_ring_ == ring_) return;
  // Every silo that may host activations (Active or ShuttingDown) has
  // reported; a silo that died meanwhile has nothing left to report.
  for (const std::string& silo : hosts_) {
    if (!reported_.contains(silo)) return;
  }
  stable_ring_ = ring_;
}

bool DirectoryOwner::rebuilding() const {
  ReaderMutexLock lock(&mu_);
  return stable_ring_ != ring_;
}

uint64_t DirectoryOwner::ring_fingerprint() const {
  ReaderMutexLock lock(&mu_);
  return ring_id_;
}

absl::Status DirectoryOwner::CheckRebuilt(const GrainId& id) const {
  if (MonoNanos() < grace_until_ &&
      (grace_ring_ == nullptr || grace_ring_->OwnerOf(id) != self_id_)) {
    // The range came from a silo declared dead a moment ago, which may run
    // its grains until its lease is over: not found is no answer yet.
    return absl::UnavailableError(absl::StrCat(
        "silo ", self_id_, " waits out the lease of a silo declared dead "
        "before it answers that ", id.ToString(), " is not active; retry"));
  }
  if (stable_ring_ == ring_) return absl::OkStatus();
  if (stable_ring_ != nullptr && stable_ring_->OwnerOf(id) == self_id_) {
    return absl::OkStatus();  // owned before the change too: nothing lost
  }
  return absl::UnavailableError(absl::StrCat(
      "silo ", self_id_, " is rebuilding the directory entries of ",
      id.ToString(), "'s range after a membership change; retry"));
}

absl::StatusOr<v1::RebuildReply> DirectoryOwner::Rebuild(
    const v1::RebuildRequest& r) {
  // Exclusive: the report and the completion check are one step.
  MutexLock lock(&mu_);
  if (self_id_.empty() || ring_->empty()) {
    return absl::UnavailableError("the directory has no view yet");
  }
  if (r.ring() != ring_id_) {
    return absl::UnavailableError(absl::StrCat(
        "silo ", self_id_, " is on another ring (view ", version_,
        "); retry once the views agree"));
  }
  if (!hosts_.contains(r.from())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "silo '", r.from(), "' is not Active or ShuttingDown in view ",
        version_));
  }
  // Everything is checked before anything changes.
  std::vector<GrainId> ids;
  ids.reserve(r.entries_size());
  for (const v1::DirectoryEntry& e : r.entries()) {
    if (e.type().empty() || e.type().size() > kMaxTypeBytes) {
      return absl::InvalidArgumentError(
          "rebuild entry without a grain type, or one over 256 bytes");
    }
    GRANARY_RETURN_IF_ERROR(ValidateGrainKey(e.key()));
    if (e.silo() != r.from()) {
      return absl::InvalidArgumentError(
          "a silo may report only activations it hosts");
    }
    GrainId id(absl::string_view(e.type()), e.key());
    if (ring_->OwnerOf(id) != self_id_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "silo ", self_id_, " does not own ", id.ToString()));
    }
    ids.push_back(std::move(id));
  }
  v1::RebuildReply reply;
  for (int i = 0; i < r.entries_size(); ++i) {
    const GrainId id(InternTypeName(ids[i].type()), ids[i].key());
    const directory::ActivationAddress mine = ToAddress(r.entries(i));
    absl::StatusOr<directory::ActivationAddress> winner =
        partition_.RegisterIfAbsent(id, mine);
    if (winner.ok() && !(*winner == mine)) {
      *reply.add_conflicts() = r.entries(i);
    }
  }
  if (!r.more()) reported_.insert(r.from());
  MaybeRebuilt();
  return reply;
}

std::string DirectoryOwner::OwnerOf(const GrainId& id) const {
  ReaderMutexLock lock(&mu_);
  return ring_->OwnerOf(id);
}

int64_t DirectoryOwner::view_version() const {
  ReaderMutexLock lock(&mu_);
  return version_;
}

absl::Status DirectoryOwner::Check(const v1::DirectoryRequest& r,
                                   GrainId* id) const {
  const v1::DirectoryEntry& e = r.entry();
  if (e.type().empty() || e.type().size() > kMaxTypeBytes) {
    return absl::InvalidArgumentError(
        "directory request without a grain type, or one over 256 bytes");
  }
  GRANARY_RETURN_IF_ERROR(ValidateGrainKey(e.key()));
  // Not interned: the request's bytes live as long as the request, and only
  // a registration (which keeps the id) interns the type.
  *id = GrainId(absl::string_view(e.type()), e.key());
  if (self_id_.empty() || ring_->empty()) {
    return absl::UnavailableError("the directory has no view yet");
  }
  if (r.view_version() > version_) {
    return absl::UnavailableError(absl::StrCat(
        "silo ", self_id_, " is at view ", version_, ", behind the caller's ",
        r.view_version(), "; retry"));
  }
  const std::string& owner = ring_->OwnerOf(*id);
  if (owner != self_id_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "silo ", self_id_, " does not own ", id->ToString(), " under view ",
        version_, " (owner: ", owner.empty() ? "none" : owner, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DirectoryReply> DirectoryOwner::Register(
    const v1::DirectoryRequest& r) {
  ReaderMutexLock lock(&mu_);
  GrainId checked;
  GRANARY_RETURN_IF_ERROR(Check(r, &checked));
  if (!active_.contains(r.entry().silo())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "silo '", r.entry().silo(), "' is not Active in view ", version_));
  }
  const directory::ActivationAddress mine = ToAddress(r.entry());
  if (!LiveEntry(checked).ok()) {
    GRANARY_RETURN_IF_ERROR(CheckRebuilt(checked));
  }
  const GrainId id(InternTypeName(checked.type()), checked.key());
  absl::StatusOr<directory::ActivationAddress> winner;
  if (r.has_replace()) {
    // A silo retires only its own stale entry, and only the one in force.
    if (r.replace().silo() != r.entry().silo()) {
      return absl::InvalidArgumentError(
          "a silo may replace only its own directory entries");
    }
    winner = partition_.ReplaceIf(id, ToAddress(r.replace()), mine);
    if (winner.status().code() == absl::StatusCode::kNotFound) {
      winner = partition_.RegisterIfAbsent(id, mine);
    }
  } else {
    winner = partition_.RegisterIfAbsent(id, mine);
  }
  GRANARY_RETURN_IF_ERROR(winner.status());
  v1::DirectoryReply reply;
  reply.set_found(true);
  *reply.mutable_entry() = ToEntry(id, *winner);
  reply.set_view_version(version_);
  return reply;
}

absl::StatusOr<v1::DirectoryReply> DirectoryOwner::Lookup(
    const v1::DirectoryRequest& r) {
  ReaderMutexLock lock(&mu_);
  GrainId id;
  GRANARY_RETURN_IF_ERROR(Check(r, &id));
  v1::DirectoryReply reply;
  reply.set_view_version(version_);
  absl::StatusOr<directory::ActivationAddress> found = LiveEntry(id);
  if (found.ok()) {
    reply.set_found(true);
    *reply.mutable_entry() = ToEntry(id, *found);
  } else {
    GRANARY_RETURN_IF_ERROR(CheckRebuilt(id));
  }
  return reply;
}

absl::StatusOr<v1::DirectoryReply> DirectoryOwner::Unregister(
    const v1::DirectoryRequest& r) {
  ReaderMutexLock lock(&mu_);
  GrainId id;
  GRANARY_RETURN_IF_ERROR(Check(r, &id));
  GRANARY_RETURN_IF_ERROR(partition_.Unregister(id, ToAddress(r.entry())));
  v1::DirectoryReply reply;
  reply.set_view_version(version_);
  absl::StatusOr<directory::ActivationAddress> left = partition_.Lookup(id);
  if (left.ok()) {
    reply.set_found(true);
    *reply.mutable_entry() = ToEntry(id, *left);
  }
  return reply;
}

namespace {

template <typename Reply>
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                 absl::StatusOr<Reply> result, Reply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) {
    *reply = *std::move(result);
    reactor->Finish(grpc::Status::OK);
  } else {
    reactor->Finish(ToGrpc(result.status()));
  }
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* DirectoryService::Register(
    grpc::CallbackServerContext* context, const v1::DirectoryRequest* request,
    v1::DirectoryReply* reply) {
  return Answer(context, owner_->Register(*request), reply);
}

grpc::ServerUnaryReactor* DirectoryService::Lookup(
    grpc::CallbackServerContext* context, const v1::DirectoryRequest* request,
    v1::DirectoryReply* reply) {
  return Answer(context, owner_->Lookup(*request), reply);
}

grpc::ServerUnaryReactor* DirectoryService::Unregister(
    grpc::CallbackServerContext* context, const v1::DirectoryRequest* request,
    v1::DirectoryReply* reply) {
  return Answer(context, owner_->Unregister(*request), reply);
}

grpc::ServerUnaryReactor* DirectoryService::Rebuild(
    grpc::CallbackServerContext* context, const v1::RebuildRequest* request,
    v1::RebuildReply* reply) {
  return Answer(context, owner_->Rebuild(*request), reply);
}

ClusterDirectory::ClusterDirectory(DirectoryOwner* local, absl::Duration timeout)
    : local_(local), timeout_(timeout) {
  HoldGrpcCallbackQueue();
}

void ClusterDirectory::OnView(const v1::MembershipView& view) {
  MutexLock lock(&mu_);
  addresses_.clear();
  for (const v1::Member& m : view.members()) {
    if (m.status() != v1::MEMBER_DEAD) {
      addresses_[storage::MemberId(m)] = m.address();
    }
  }
  for (auto it = stubs_.begin(); it != stubs_.end();) {
    if (!addresses_.contains(it->first)) {
      stubs_.erase(it++);  // requests in flight keep their own reference
    } else {
      ++it;
    }
  }
}

std::shared_ptr<v1::Directory::Stub> ClusterDirectory::StubFor(
    const std::string& silo_id) {
  MutexLock lock(&mu_);
  auto address = addresses_.find(silo_id);
  if (address == addresses_.end()) return nullptr;
  std::shared_ptr<v1::Directory::Stub>& stub = stubs_[silo_id];
  if (stub == nullptr) {
    stub = v1::Directory::NewStub(grpc::CreateChannel(
        address->second, grpc::InsecureChannelCredentials()));
  }
  return stub;
}

void ClusterDirectory::Register(const v1::DirectoryEntry& entry, Done done,
                                const v1::DirectoryEntry* replace) {
  v1::DirectoryRequest request;
  *request.mutable_entry() = entry;
  if (replace != nullptr) *request.mutable_replace() = *replace;
  Send(Op::kRegister, std::move(request), std::move(done));
}

void ClusterDirectory::Lookup(const GrainId& id, Done done) {
  v1::DirectoryRequest request;
  request.mutable_entry()->set_type(std::string(id.type()));
  request.mutable_entry()->set_key(id.key());
  Send(Op::kLookup, std::move(request), std::move(done));
}

void ClusterDirectory::Unregister(const v1::DirectoryEntry& entry, Done done) {
  v1::DirectoryRequest request;
  *request.mutable_entry() = entry;
  Send(Op::kUnregister, std::move(request), std::move(done));
}

void ClusterDirectory::Send(Op op, v1::DirectoryRequest request, Done done) {
  request.set_view_version(local_->view_version());
  const GrainId id(InternTypeName(request.entry().type()),
                   request.entry().key());
  const std::string owner = local_->OwnerOf(id);
  if (owner.empty()) {
    done(absl::UnavailableError("no Active silo owns any grain yet"));
    return;
  }
  if (owner == local_->self_id()) {
    switch (op) {
      case Op::kRegister:
        done(local_->Register(request));
        return;
      case Op::kLookup:
        done(local_->Lookup(request));
        return;
      case Op::kUnregister:
        done(local_->Unregister(request));
        return;
    }
  }
  std::shared_ptr<v1::Directory::Stub> stub = StubFor(owner);
  if (stub == nullptr) {
    done(absl::UnavailableError(absl::StrCat("no address for silo ", owner)));
    return;
  }
  StartUnary<v1::DirectoryRequest, v1::DirectoryReply>(
      std::move(request), timeout_, /*wait_for_ready=*/false, stub,
      [&](grpc::ClientContext* c, const v1::DirectoryRequest* q,
          v1::DirectoryReply* r, std::function<void(grpc::Status)> on_done) {
        switch (op) {
          case Op::kRegister:
            stub->async()->Register(c, q, r, std::move(on_done));
            break;
          case Op::kLookup:
            stub->async()->Lookup(c, q, r, std::move(on_done));
            break;
          case Op::kUnregister:
            stub->async()->Unregister(c, q, r, std::move(on_done));
            break;
        }
      },
      std::move(done));
}

}  // namespace granary::silo

namespace granary::silo {

void ClusterDirectory::Rebuild(const std::string& owner,
                               v1::RebuildRequest request, RebuildDone done) {
  request.set_view_version(local_->view_version());
  if (owner == local_->self_id()) {
    done(local_->Rebuild(request));
    return;
  }
  std::shared_ptr<v1::Directory::Stub> stub = StubFor(owner);
  if (stub == nullptr) {
    done(absl::UnavailableError(absl::StrCat("no address for silo ", owner)));
    return;
  }
  StartUnary<v1::RebuildRequest, v1::RebuildReply>(
      std::move(request), timeout_, /*wait_for_ready=*/false, stub,
      [&](grpc::ClientContext* c, const v1::RebuildRequest* q,
          v1::RebuildReply* r, std::function<void(grpc::Status)> on_done) {
        stub->async()->Rebuild(c, q, r, std::move(on_done));
      },
      std::move(done));
}

}  // namespace granary::silo
