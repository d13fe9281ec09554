// File: directory/directory_service.h
// -----------------------------------------------------------------------------
// granary.v1.Directory on a silo's endpoint: the other silos' register,
// lookup, unregister and rebuild requests, answered by this silo's
// partition (directory/partition.h).
//
//   DirectoryService service(&partition);
//   builder.RegisterService(&service);
//
// Threading: thread-safe; answers inline on gRPC's threads.
#pragma once

#include "directory/partition.h"
#include "granary/v1/cluster.grpc.pb.h"

namespace granary::directory {

class DirectoryService final : public v1::Directory::CallbackService {
 public:
  explicit DirectoryService(DirectoryPartition* owner) : owner_(owner) {}
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
  DirectoryPartition* const owner_;
};

}  // namespace granary::directory
