// File: directory/directory_service.h
// -----------------------------------------------------------------------------
// granary.v1.Directory on a silo's endpoint: the other silos' register,
// lookup, unregister and rebuild requests, answered by this silo's
// partition (directory/partition.h).
//
//   DirectoryService service(&partition, [](absl::string_view type) {
//     return type == "granary.examples.Counter"     // the types hosted
//                ? absl::OkStatus()
//                : absl::PermissionDeniedError("not hosted");
//   });
//   builder.RegisterService(&service);
//
// Even an authenticated silo is trusted only for what is its own: it
// registers, replaces and unregisters entries of activations it hosts and
// reports (Rebuild) only its own (rpc::AuthorityOf names the hosts a peer
// speaks for). Requests for a grain type no silo hosts are refused before
// the type is interned. Refusals are PERMISSION_DENIED.
//
// Threading: thread-safe; answers inline on gRPC's threads.
#pragma once

#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "directory/partition.h"
#include "granary/v1/cluster.grpc.pb.h"

namespace granary::directory {

class DirectoryService final : public v1::Directory::CallbackService {
 public:
  // `check_type` answers OK for a grain type some live silo of the
  // cluster hosts (PERMISSION_DENIED otherwise, UNAVAILABLE while it cannot
  // tell yet); null: any type.
  explicit DirectoryService(
      DirectoryPartition* owner,
      std::function<absl::Status(absl::string_view type)> check_type = nullptr)
      : owner_(owner), check_type_(std::move(check_type)) {}
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
  absl::Status Authorize(const grpc::CallbackServerContext& context,
                         const v1::DirectoryEntry& entry, bool own_entry) const;

  DirectoryPartition* const owner_;
  const std::function<absl::Status(absl::string_view)> check_type_;
};

}  // namespace granary::directory
