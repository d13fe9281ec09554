#include "directory/directory_service.h"

#include "core/log.h"
#include "core/status.h"
#include "grpcpp/grpcpp.h"
#include "rpc/credentials.h"
#include "rpc/status.h"

namespace granary::directory {

namespace {

template <typename Reply>
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                 absl::StatusOr<Reply> result, Reply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) {
    *reply = *std::move(result);
    reactor->Finish(grpc::Status::OK);
  } else {
    reactor->Finish(rpc::ToGrpc(result.status()));
  }
  return reactor;
}

grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* context,
                                 const absl::Status& why) {
  GRANARY_LOG_EVERY(kWarning, absl::Seconds(1))
      << "peer=" << LogQuote(context->peer())
      << " directory request refused: " << why.message();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(rpc::ToGrpc(why));
  return reactor;
}

}  // namespace

absl::Status DirectoryService::Authorize(
    const grpc::CallbackServerContext& context, const v1::DirectoryEntry& entry,
    bool own_entry) const {
  if (check_type_) GRANARY_RETURN_IF_ERROR(check_type_(entry.type()));
  if (own_entry && !rpc::AuthorityOf(context).Covers(entry.silo())) {
    return absl::PermissionDeniedError(
        "a silo registers, replaces and unregisters only directory entries "
        "of activations it hosts");
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* DirectoryService::Register(
    grpc::CallbackServerContext* context, const v1::DirectoryRequest* request,
    v1::DirectoryReply* reply) {
  if (absl::Status s = Authorize(*context, request->entry(), true); !s.ok()) {
    return Refuse(context, s);
  }
  if (request->has_replace()) {
    if (absl::Status s = Authorize(*context, request->replace(), true);
        !s.ok()) {
      return Refuse(context, s);
    }
  }
  return Answer(context, owner_->Register(*request), reply);
}

grpc::ServerUnaryReactor* DirectoryService::Lookup(
    grpc::CallbackServerContext* context, const v1::DirectoryRequest* request,
    v1::DirectoryReply* reply) {
  if (absl::Status s = Authorize(*context, request->entry(), false); !s.ok()) {
    return Refuse(context, s);
  }
  return Answer(context, owner_->Lookup(*request), reply);
}

grpc::ServerUnaryReactor* DirectoryService::Unregister(
    grpc::CallbackServerContext* context, const v1::DirectoryRequest* request,
    v1::DirectoryReply* reply) {
  if (absl::Status s = Authorize(*context, request->entry(), true); !s.ok()) {
    return Refuse(context, s);
  }
  return Answer(context, owner_->Unregister(*request), reply);
}

grpc::ServerUnaryReactor* DirectoryService::Rebuild(
    grpc::CallbackServerContext* context, const v1::RebuildRequest* request,
    v1::RebuildReply* reply) {
  if (!rpc::AuthorityOf(*context).Covers(request->from())) {
    return Refuse(context, absl::PermissionDeniedError(
                               "a silo reports only its own activations"));
  }
  for (const v1::DirectoryEntry& e : request->entries()) {
    // Each entry's silo must be `from` (the partition checks that).
    if (absl::Status s = Authorize(*context, e, false); !s.ok()) {
      return Refuse(context, s);
    }
  }
  return Answer(context, owner_->Rebuild(*request), reply);
}

}  // namespace granary::directory
