// File: directory/directory_client.h
// -----------------------------------------------------------------------------
// The silo's client of the distributed directory: each request goes to the
// owner of its grain under the current view, this silo's own partition
// directly, another silo over its Directory service.
//
//   DirectoryClient directory(&partition, &transport);
//   absl::StatusOr<v1::DirectoryReply> r = co_await directory.Register(entry);
//
// Threading: thread-safe. An awaiting coroutine resumes on the transport's
// threads (or inline for grains this silo owns) and must not block there.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/task.h"
#include "directory/directory_transport.h"
#include "directory/partition.h"
#include "granary/v1/cluster.grpc.pb.h"

namespace granary::directory {

// Asks the owner of each grain: this silo's own partition directly, other
// silos through `transport`.
class DirectoryClient {
 public:
  using Reply = absl::StatusOr<v1::DirectoryReply>;

  // `local` and `transport` must outlive the client.
  DirectoryClient(DirectoryPartition* local, DirectoryTransport* transport)
      : local_(local), transport_(transport) {}

  Task<Reply> Register(v1::DirectoryEntry entry,
                       std::optional<v1::DirectoryEntry> replace = {});
  // A live migration: moves the grain's entry from `from` (another silo's
  // activation) to `entry`, only while `from` is the entry in force. The
  // reply's entry is the one in force after it (not `entry`: it lost).
  // `confirm`: sent by the silo `from` names once the move succeeded, it
  // registers `entry` where the owner has no entry.
  Task<Reply> Move(v1::DirectoryEntry entry, v1::DirectoryEntry from,
                   bool confirm = false);
  Task<Reply> Lookup(GrainId id);
  Task<Reply> Unregister(v1::DirectoryEntry entry);
  // Sends a rebuild report to silo `owner` (this silo's own partition
  // directly).
  Task<absl::StatusOr<v1::RebuildReply>> Rebuild(std::string owner,
                                                 v1::RebuildRequest request);

 private:
  Task<Reply> Send(DirectoryOp op, v1::DirectoryRequest request);

  DirectoryPartition* const local_;
  DirectoryTransport* const transport_;
};

}  // namespace granary::directory
