// File: directory/directory_transport.h
// -----------------------------------------------------------------------------
// How directory requests reach other silos' partitions: over gRPC between
// silo processes (GrpcDirectoryTransport, below), or in one process for
// tests (testing/loopback_transport.h). DirectoryClient sends through
// one; a silo's Transport (silo/cluster/transport.h) is one.
//
//   GrpcDirectoryTransport transport;
//   transport.OnView(view);                   // silo ids -> endpoints
//   transport.SendDirectory(owner, DirectoryOp::kLookup, request, done);
//
// Threading: thread-safe; `done` runs once, inline or on another thread,
// and must not block.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/sync.h"
#include "granary/v1/cluster.grpc.pb.h"
#include "rpc/security.h"

namespace granary::directory {

enum class DirectoryOp { kRegister, kLookup, kUnregister };

class DirectoryTransport {
 public:
  using Done = std::function<void(absl::StatusOr<v1::DirectoryReply>)>;
  using RebuildDone = std::function<void(absl::StatusOr<v1::RebuildReply>)>;

  virtual ~DirectoryTransport() = default;
  // Sends `request` to silo `silo_id`'s partition. UNAVAILABLE when the
  // silo cannot be reached.
  virtual void SendDirectory(const std::string& silo_id, DirectoryOp op,
                             v1::DirectoryRequest request, Done done) = 0;
  virtual void SendRebuild(const std::string& silo_id,
                           v1::RebuildRequest request, RebuildDone done) = 0;
};

// Directory requests over each silo's granary.v1.Directory service.
class GrpcDirectoryTransport final : public DirectoryTransport {
 public:
  // `security`: what this silo presents to the others and trusts in them.
  explicit GrpcDirectoryTransport(absl::Duration timeout = absl::Seconds(5),
                                  rpc::ClientSecurity security = {});

  // Learns the silos' endpoints (ids -> addresses) of `view`.
  void OnView(const v1::MembershipView& view);

  void SendDirectory(const std::string& silo_id, DirectoryOp op,
                     v1::DirectoryRequest request, Done done) override;
  void SendRebuild(const std::string& silo_id, v1::RebuildRequest request,
                   RebuildDone done) override;

 private:
  std::shared_ptr<v1::Directory::Stub> StubFor(const std::string& silo_id);

  const absl::Duration timeout_;
  const rpc::ClientSecurity security_;
  Mutex mu_;
  absl::flat_hash_map<std::string, std::string> addresses_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<v1::Directory::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::directory
