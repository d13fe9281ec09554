// File: directory/directory_client.h
// -----------------------------------------------------------------------------
// The silo's client of the distributed directory: each request goes to the
// owner of its grain under the current view, this silo's own partition
// directly, another silo over its Directory service.
//
//   DirectoryClient directory(&partition, &transport);
//   directory.Register(entry, [](absl::StatusOr<v1::DirectoryReply> r) {...});
//
// Threading: thread-safe. Completions run on gRPC's threads (or inline for
// grains this silo owns) and must not block.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "directory/directory_transport.h"
#include "directory/partition.h"
#include "granary/v1/cluster.grpc.pb.h"

namespace granary::directory {

// Asks the owner of each grain: this silo's own partition directly, other
// silos through `transport`.
class DirectoryClient {
 public:
  using Done = DirectoryTransport::Done;
  using RebuildDone = DirectoryTransport::RebuildDone;

  // `local` and `transport` must outlive the client.
  DirectoryClient(DirectoryPartition* local, DirectoryTransport* transport)
      : local_(local), transport_(transport) {}

  void Register(const v1::DirectoryEntry& entry, Done done,
                const v1::DirectoryEntry* replace = nullptr);
  void Lookup(const GrainId& id, Done done);
  void Unregister(const v1::DirectoryEntry& entry, Done done);
  // Sends a rebuild report to silo `owner` (this silo's own partition
  // directly).
  void Rebuild(const std::string& owner, v1::RebuildRequest request,
               RebuildDone done);

 private:
  void Send(DirectoryOp op, v1::DirectoryRequest request, Done done);

  DirectoryPartition* const local_;
  DirectoryTransport* const transport_;
};

}  // namespace granary::directory
