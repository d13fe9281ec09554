#include "silo/cluster/storage_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/grain_id.h"
#include "core/status.h"
#include "grpcpp/grpcpp.h"
#include "rpc/async_unary.h"
#include "rpc/callback_queue.h"
#include "rpc/credentials.h"
#include "rpc/limits.h"
#include "rpc/status.h"

namespace granary::silo {
namespace {

v1::StateKey ToKey(const GrainId& id) {
  v1::StateKey k;
  k.set_type(std::string(id.type()));
  k.set_key(id.key());
  return k;
}

}  // namespace

void StorageService::AllowTypes(const std::vector<std::string>& types) {
  MutexLock lock(&mu_);
  for (const std::string& t : types) types_[t] = InternTypeName(t);
  ready_ = true;
}

void StorageService::SetHostCheck(GrainHostCheck check) {
  check_.Set(std::move(check));
}

Task<absl::Status> StorageService::MayChange(rpc::PeerAuthority peer,
                                             GrainId id) const {
  return check_.Run(std::move(peer), std::move(id),
                    "grain storage is not ready yet");
}

Task<absl::StatusOr<std::string>> StorageService::CheckedWrite(
    rpc::PeerAuthority peer, GrainId id, std::string bytes,
    std::string expected_etag) {
  Task<absl::Status> may_task = MayChange(std::move(peer), id);
  absl::Status may = co_await std::move(may_task);
  if (!may.ok()) co_return may;
  co_return co_await storage_->Write(std::move(id), std::move(bytes),
                                     std::move(expected_etag));
}

Task<absl::StatusOr<std::string>> StorageService::CheckedClear(
    rpc::PeerAuthority peer, GrainId id, std::string expected_etag) {
  Task<absl::Status> may_task = MayChange(std::move(peer), id);
  absl::Status may = co_await std::move(may_task);
  if (!may.ok()) co_return may;
  co_return co_await storage_->Clear(std::move(id), std::move(expected_etag));
}

absl::StatusOr<GrainId> StorageService::ToGrain(const v1::StateKey& k) const {
  ReaderMutexLock lock(&mu_);
  if (!ready_) return absl::UnavailableError("grain storage is not ready yet");
  auto type = types_.find(k.type());
  if (type == types_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("grain state request for unknown grain type '",
                     k.type().substr(0, 256), "'"));
  }
  if (absl::Status valid = ValidateGrainKey(k.key()); !valid.ok()) {
    return valid;
  }
  return GrainId(type->second, k.key());
}

grpc::ServerUnaryReactor* StorageService::Read(
    grpc::CallbackServerContext* context, const v1::StateKey* request,
    v1::StoredState* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<GrainId> id = ToGrain(*request);
  if (!id.ok()) {
    reactor->Finish(rpc::ToGrpc(id.status()));
    return reactor;
  }
  Detach(
      storage_->Read(*std::move(id)),
      [reactor, reply](absl::StatusOr<absl::StatusOr<storage::StoredState>> r) {
        absl::StatusOr<storage::StoredState> s = Flatten(std::move(r));
        if (!s.ok()) {
          reactor->Finish(rpc::ToGrpc(s.status()));
          return;
        }
        reply->set_exists(s->exists);
        reply->set_bytes(std::move(s->bytes));
        reply->set_etag(std::move(s->etag));
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* StorageService::Write(
    grpc::CallbackServerContext* context, const v1::WriteStateRequest* request,
    v1::WriteStateReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<GrainId> id = ToGrain(request->grain());
  if (!id.ok()) {
    reactor->Finish(rpc::ToGrpc(id.status()));
    return reactor;
  }
  Detach(CheckedWrite(rpc::AuthorityOf(*context), *std::move(id),
                      request->bytes(), request->expected_etag()),
         [reactor, reply](absl::StatusOr<absl::StatusOr<std::string>> r) {
           absl::StatusOr<std::string> etag = Flatten(std::move(r));
           if (!etag.ok()) {
             reactor->Finish(rpc::ToGrpc(etag.status()));
             return;
           }
           reply->set_etag(*std::move(etag));
           reactor->Finish(grpc::Status::OK);
         });
  return reactor;
}

grpc::ServerUnaryReactor* StorageService::Clear(
    grpc::CallbackServerContext* context, const v1::ClearStateRequest* request,
    v1::ClearStateReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<GrainId> id = ToGrain(request->grain());
  if (!id.ok()) {
    reactor->Finish(rpc::ToGrpc(id.status()));
    return reactor;
  }
  Detach(CheckedClear(rpc::AuthorityOf(*context), *std::move(id),
                      request->expected_etag()),
         [reactor, reply](absl::StatusOr<absl::StatusOr<std::string>> r) {
           absl::StatusOr<std::string> etag = Flatten(std::move(r));
           if (etag.ok()) reply->set_etag(*std::move(etag));
           reactor->Finish(rpc::ToGrpc(etag.status()));
         });
  return reactor;
}

RemoteGrainStorage::RemoteGrainStorage(const std::string& primary,
                                       absl::Duration timeout,
                                       const rpc::ClientSecurity& security)
    : timeout_(timeout) {
  rpc::HoldGrpcCallbackQueue();
  stub_ = v1::GrainState::NewStub(
      rpc::NewChannel(primary, rpc::MakeChannelCredentials(security)));
}

Task<absl::StatusOr<storage::StoredState>> RemoteGrainStorage::Read(
    GrainId id) {
  absl::StatusOr<v1::StoredState> reply =
      co_await rpc::AwaitUnary<v1::StateKey, v1::StoredState>(
          ToKey(id), timeout_, /*wait_for_ready=*/true,
          [this](grpc::ClientContext* c, const v1::StateKey* q,
                 v1::StoredState* r, std::function<void(grpc::Status)> done) {
            stub_->async()->Read(c, q, r, std::move(done));
          });
  if (!reply.ok()) co_return reply.status();
  storage::StoredState out;
  out.exists = reply->exists();
  out.bytes = std::move(*reply->mutable_bytes());
  out.etag = std::move(*reply->mutable_etag());
  co_return out;
}

Task<absl::StatusOr<std::string>> RemoteGrainStorage::Write(
    GrainId id, std::string bytes, std::string expected_etag) {
  v1::WriteStateRequest request;
  *request.mutable_grain() = ToKey(id);
  request.set_bytes(std::move(bytes));
  request.set_expected_etag(std::move(expected_etag));
  absl::StatusOr<v1::WriteStateReply> reply =
      co_await rpc::AwaitUnary<v1::WriteStateRequest, v1::WriteStateReply>(
          std::move(request), timeout_, /*wait_for_ready=*/true,
          [this](grpc::ClientContext* c, const v1::WriteStateRequest* q,
                 v1::WriteStateReply* r,
                 std::function<void(grpc::Status)> done) {
            stub_->async()->Write(c, q, r, std::move(done));
          });
  if (!reply.ok()) co_return reply.status();
  co_return std::move(*reply->mutable_etag());
}

Task<absl::StatusOr<std::string>> RemoteGrainStorage::Clear(
    GrainId id, std::string expected_etag) {
  v1::ClearStateRequest request;
  *request.mutable_grain() = ToKey(id);
  request.set_expected_etag(std::move(expected_etag));
  absl::StatusOr<v1::ClearStateReply> reply =
      co_await rpc::AwaitUnary<v1::ClearStateRequest, v1::ClearStateReply>(
          std::move(request), timeout_, /*wait_for_ready=*/true,
          [this](grpc::ClientContext* c, const v1::ClearStateRequest* q,
                 v1::ClearStateReply* r,
                 std::function<void(grpc::Status)> done) {
            stub_->async()->Clear(c, q, r, std::move(done));
          });
  if (!reply.ok()) co_return reply.status();
  co_return std::move(*reply->mutable_etag());
}

}  // namespace granary::silo
