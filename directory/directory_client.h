// File: directory/directory_client.h
// -----------------------------------------------------------------------------
// The silo's client of the distributed directory: each request goes to the
// owner of its grain under the current view, this silo's own partition
// directly, another silo over its Directory service.
//
//   DirectoryClient directory(&partition);
//   directory.OnView(view);
//   directory.Register(entry, [](absl::StatusOr<v1::DirectoryReply> r) {...});
//
// Threading: thread-safe. Completions run on gRPC's threads (or inline for
// grains this silo owns) and must not block.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/sync.h"
#include "directory/partition.h"
#include "granary/v1/cluster.grpc.pb.h"

namespace granary::directory {

// Asks the owner of each grain: this silo's own partition directly, other
// silos over their Directory service.
class DirectoryClient {
 public:
  using Done = std::function<void(absl::StatusOr<v1::DirectoryReply>)>;

  explicit DirectoryClient(DirectoryPartition* local,
                            absl::Duration timeout = absl::Seconds(5));

  // Learns the silos' addresses (ids -> silo endpoints) of `view`.
  void OnView(const v1::MembershipView& view);

  void Register(const v1::DirectoryEntry& entry, Done done,
                const v1::DirectoryEntry* replace = nullptr);
  void Lookup(const GrainId& id, Done done);
  void Unregister(const v1::DirectoryEntry& entry, Done done);
  // Sends a rebuild report to silo `owner` (this silo's own partition
  // directly).
  using RebuildDone = std::function<void(absl::StatusOr<v1::RebuildReply>)>;
  void Rebuild(const std::string& owner, v1::RebuildRequest request,
               RebuildDone done);

 private:
  enum class Op { kRegister, kLookup, kUnregister };
  void Send(Op op, v1::DirectoryRequest request, Done done);
  std::shared_ptr<v1::Directory::Stub> StubFor(const std::string& silo_id);

  DirectoryPartition* const local_;
  const absl::Duration timeout_;
  Mutex mu_;
  absl::flat_hash_map<std::string, std::string> addresses_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<v1::Directory::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::directory
