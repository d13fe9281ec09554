#include "silo/storage_service.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/grpc_callback_queue.h"
#include "core/grain_id.h"
#include "grpcpp/grpcpp.h"
#include "silo/grpc_status.h"

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

absl::StatusOr<GrainId> StorageService::ToGrain(const v1::StateKey& k) const {
  ReaderMutexLock lock(&mu_);
  if (!ready_) return absl::UnavailableError("grain storage is not ready yet");
  auto type = types_.find(k.type());
  if (type == types_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grain state request for unknown grain type '",
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
    reactor->Finish(ToGrpc(id.status()));
    return reactor;
  }
  storage_->Read(*id, [reactor, reply](absl::StatusOr<storage::StoredState> s) {
    if (!s.ok()) {
      reactor->Finish(ToGrpc(s.status()));
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
    reactor->Finish(ToGrpc(id.status()));
    return reactor;
  }
  storage_->Write(*id, request->bytes(), request->expected_etag(),
                  [reactor, reply](absl::StatusOr<std::string> etag) {
                    if (!etag.ok()) {
                      reactor->Finish(ToGrpc(etag.status()));
                      return;
                    }
                    reply->set_etag(*std::move(etag));
                    reactor->Finish(grpc::Status::OK);
                  });
  return reactor;
}

grpc::ServerUnaryReactor* StorageService::Clear(
    grpc::CallbackServerContext* context, const v1::ClearStateRequest* request,
    v1::ClearStateReply*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<GrainId> id = ToGrain(request->grain());
  if (!id.ok()) {
    reactor->Finish(ToGrpc(id.status()));
    return reactor;
  }
  storage_->Clear(*id, request->expected_etag(), [reactor](absl::Status s) {
    reactor->Finish(ToGrpc(s));
  });
  return reactor;
}

RemoteGrainStorage::RemoteGrainStorage(const std::string& primary,
                                       absl::Duration timeout)
    : timeout_(timeout) {
  HoldGrpcCallbackQueue();
  stub_ = v1::GrainState::NewStub(
      grpc::CreateChannel(primary, grpc::InsecureChannelCredentials()));
}

namespace {

// One unary call in flight: its context, request and reply live here until
// gRPC calls back.
template <typename Req, typename Resp, typename Done>
struct Unary {
  grpc::ClientContext context;
  Req request;
  Resp reply;
  Done done;  // set before the call starts; the completion captures only us
  // Released before the call starts, acquired in its completion: what the
  // caller made before (the completion and what it captured) is visible on
  // gRPC's thread, and ThreadSanitizer, which does not see inside gRPC,
  // sees the order too.
  std::atomic<bool> started{false};
};

}  // namespace

void RemoteGrainStorage::Read(const GrainId& id, ReadDone done) {
  using Call = Unary<v1::StateKey, v1::StoredState, ReadDone>;
  auto* c = new Call;
  c->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  c->context.set_wait_for_ready(true);  // ride out a reconnect to the primary
  c->request = ToKey(id);
  c->done = std::move(done);
  c->started.store(true, std::memory_order_release);
  stub_->async()->Read(&c->context, &c->request, &c->reply,
                       [c](grpc::Status s) {
                         (void)c->started.load(std::memory_order_acquire);
                         std::unique_ptr<Call> owned(c);
                         if (!s.ok()) {
                           owned->done(FromGrpc(s));
                           return;
                         }
                         storage::StoredState out;
                         out.exists = owned->reply.exists();
                         out.bytes = std::move(*owned->reply.mutable_bytes());
                         out.etag = std::move(*owned->reply.mutable_etag());
                         owned->done(std::move(out));
                       });
}

void RemoteGrainStorage::Write(const GrainId& id, std::string bytes,
                               std::string expected_etag, WriteDone done) {
  using Call = Unary<v1::WriteStateRequest, v1::WriteStateReply, WriteDone>;
  auto* c = new Call;
  c->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  c->context.set_wait_for_ready(true);
  *c->request.mutable_grain() = ToKey(id);
  c->request.set_bytes(std::move(bytes));
  c->request.set_expected_etag(std::move(expected_etag));
  c->done = std::move(done);
  c->started.store(true, std::memory_order_release);
  stub_->async()->Write(&c->context, &c->request, &c->reply,
                        [c](grpc::Status s) {
                          (void)c->started.load(std::memory_order_acquire);
                          std::unique_ptr<Call> owned(c);
                          if (!s.ok()) {
                            owned->done(FromGrpc(s));
                            return;
                          }
                          owned->done(std::move(*owned->reply.mutable_etag()));
                        });
}

void RemoteGrainStorage::Clear(const GrainId& id, std::string expected_etag,
                               ClearDone done) {
  using Call = Unary<v1::ClearStateRequest, v1::ClearStateReply, ClearDone>;
  auto* c = new Call;
  c->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  c->context.set_wait_for_ready(true);
  *c->request.mutable_grain() = ToKey(id);
  c->request.set_expected_etag(std::move(expected_etag));
  c->done = std::move(done);
  c->started.store(true, std::memory_order_release);
  stub_->async()->Clear(&c->context, &c->request, &c->reply,
                        [c](grpc::Status s) {
                          (void)c->started.load(std::memory_order_acquire);
                          std::unique_ptr<Call> owned(c);
                          owned->done(FromGrpc(s));
                        });
}

}  // namespace granary::silo
