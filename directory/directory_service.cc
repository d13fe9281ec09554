#include "directory/directory_service.h"

#include "grpcpp/grpcpp.h"
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

}  // namespace granary::directory
