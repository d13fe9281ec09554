// File: silo/cluster/storage_service.h
// -----------------------------------------------------------------------------
// Grain state shared by the silos of a dev cluster (DESIGN.md, Storage): the
// primary serves its GrainStorage over gRPC (granary.v1.GrainState), and
// every other silo uses RemoteGrainStorage in place of a store of its own,
// so a grain that moves to another silo (its silo died, or it was
// deactivated and placed elsewhere) reads the state it last wrote. Etags
// travel with the state, so two writers can never overwrite each other
// blindly: the stale one gets ABORTED.
//
//   StorageService service(&rocksdb);            // on the primary
//   builder.RegisterService(&service);
//   RemoteGrainStorage storage("10.0.0.1:11111"); // on the others
//
// StorageService starts the store's task for each request and finishes the
// reactor when it does (on the store's thread, or inline).
//
// Threading: thread-safe. RemoteGrainStorage's tasks resume their awaiter
// on gRPC's threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/grain_id.h"
#include "core/sync.h"
#include "granary/v1/cluster.grpc.pb.h"
#include "rpc/credentials.h"
#include "rpc/security.h"
#include "silo/cluster/routing/grain_host_check.h"
#include "storage/grain_storage.h"

namespace granary::silo {

class StorageService final : public v1::GrainState::CallbackService {
 public:
  explicit StorageService(storage::GrainStorage* storage) : storage_(storage) {}
  // The grain types whose state may be stored (the primary's own); requests
  // for others are refused, so names from the network are never kept.
  // Until it is called every request is answered UNAVAILABLE.
  void AllowTypes(const std::vector<std::string>& types);
  // Writes and clears from a peer with an identity (mutual TLS) pass
  // `check` first (silo/cluster/routing/grain_host_check.h); until it is set
  // they are answered UNAVAILABLE.
  void SetHostCheck(GrainHostCheck check);
  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* context,
                                 const v1::StateKey* request,
                                 v1::StoredState* reply) override;
  grpc::ServerUnaryReactor* Write(grpc::CallbackServerContext* context,
                                  const v1::WriteStateRequest* request,
                                  v1::WriteStateReply* reply) override;
  grpc::ServerUnaryReactor* Clear(grpc::CallbackServerContext* context,
                                  const v1::ClearStateRequest* request,
                                  v1::ClearStateReply* reply) override;

 private:
  // The grain a request names: INVALID_ARGUMENT for a bad key or an
  // unknown type.
  absl::StatusOr<GrainId> ToGrain(const v1::StateKey& k) const;
  // OK when `peer` may change `id`'s state (see SetHostCheck).
  Task<absl::Status> MayChange(rpc::PeerAuthority peer, GrainId id) const;
  Task<absl::StatusOr<std::string>> CheckedWrite(rpc::PeerAuthority peer,
                                                 GrainId id, std::string bytes,
                                                 std::string expected_etag);
  Task<absl::StatusOr<std::string>> CheckedClear(rpc::PeerAuthority peer,
                                                 GrainId id,
                                                 std::string expected_etag);

  storage::GrainStorage* const storage_;
  mutable Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, absl::string_view> types_
      ABSL_GUARDED_BY(mu_);  // -> interned
  GrainHostCheckSlot check_;
};

class RemoteGrainStorage final : public storage::GrainStorage {
 public:
  // `primary`: the primary silo's endpoint, HOST:PORT.
  // `security`: what this silo presents to the primary and trusts in it.
  explicit RemoteGrainStorage(const std::string& primary,
                              absl::Duration timeout = absl::Seconds(10),
                              const rpc::ClientSecurity& security = {});
  // Each task resumes its awaiter on the gRPC thread that completes the
  // call.
  Task<absl::StatusOr<storage::StoredState>> Read(GrainId id) override;
  Task<absl::StatusOr<std::string>> Write(GrainId id, std::string bytes,
                                          std::string expected_etag) override;
  Task<absl::StatusOr<std::string>> Clear(GrainId id,
                                          std::string expected_etag) override;

 private:
  const absl::Duration timeout_;
  std::unique_ptr<v1::GrainState::Stub> stub_;
};

}  // namespace granary::silo
