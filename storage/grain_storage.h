// File: storage/grain_storage.h
// -----------------------------------------------------------------------------
// Where grain state lives between activations. A provider stores, per grain
// id, the serialized state message and an etag that changes on every write;
// a write names the etag it read, so two activations of one grain (or two
// writers racing) cannot overwrite each other blindly: the stale one gets
// ABORTED. Providers: memory (tests, --storage=memory) and RocksDB (the
// embedded default); the interface assumes neither, so shared stores fit.
//
//   storage.Read(id, [](absl::StatusOr<StoredState> s) {
//     // s->exists, s->bytes, s->etag ("" when nothing is stored)
//   });
//   storage.Write(id, bytes, /*expected_etag=*/s->etag,
//                 [](absl::StatusOr<std::string> new_etag) {...});
//
// Completion: `done` runs exactly once, on a thread of the provider's (or
// inline when the provider never blocks); it must not block. Writes and
// clears complete in the order they were issued; a read issued while a
// write of the same id is still pending may see the state before that write
// (an activation awaits each operation, so it never issues them that way).
//
// Threading: every method is thread-safe.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/grain_id.h"

namespace granary::storage {

struct StoredState {
  bool exists = false;
  std::string bytes;  // the serialized state message
  std::string etag;   // "" when nothing is stored
};

class GrainStorage {
 public:
  using ReadDone = std::function<void(absl::StatusOr<StoredState>)>;
  // The new etag, or ABORTED when `expected_etag` is not the stored one.
  using WriteDone = std::function<void(absl::StatusOr<std::string>)>;
  using ClearDone = std::function<void(absl::Status)>;

  virtual ~GrainStorage() = default;

  virtual void Read(const GrainId& id, ReadDone done) = 0;
  // Stores `bytes` if the stored etag is `expected_etag` ("" = nothing
  // stored yet).
  virtual void Write(const GrainId& id, std::string bytes,
                     std::string expected_etag, WriteDone done) = 0;
  // Removes the state if the stored etag is `expected_etag`.
  virtual void Clear(const GrainId& id, std::string expected_etag,
                     ClearDone done) = 0;
};

// The ABORTED status of a write or clear whose expected etag is stale.
absl::Status StaleEtagError(const GrainId& id, const std::string& expected,
                            const std::string& stored);

}  // namespace granary::storage
