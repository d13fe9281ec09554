// File: storage/grain_storage.h
// -----------------------------------------------------------------------------
// Where grain state lives between activations. A provider stores, per grain
// id, the serialized state message and an etag that changes on every write;
// a write names the etag it read, so two activations of one grain (or two
// writers racing) cannot overwrite each other blindly: the stale one gets
// ABORTED. Providers: memory (tests, --storage=memory) and RocksDB (the
// embedded default); the interface assumes neither, so shared stores fit.
//
//   absl::StatusOr<StoredState> s = co_await storage.Read(id);
//   // s->exists, s->bytes, s->etag ("" when nothing was ever stored)
//   absl::StatusOr<std::string> new_etag =
//       co_await storage.Write(id, bytes, /*expected_etag=*/s->etag);
//
// Every operation is a lazy Task: nothing happens until it is awaited or
// started (core/detach.h). Arguments are taken by value, so a task may
// outlive the expression that made it. The awaiting coroutine resumes on a
// thread of the provider's (its writer thread, a gRPC thread), or inline
// when the provider never blocks: what runs there must not block. The grain
// runtime therefore never awaits a store from grain code directly; it
// starts the task detached and posts the result to the activation
// (silo/runtime/grain.cc). A write or clear is acknowledged (its task
// finishes) only once it is durable as far as the provider promises.
// Writes and clears started one after another complete in that order; a
// read started while a write of the same id is still pending may see the
// state before that write (an activation awaits each operation, so it never
// issues them that way). The tasks report failures as statuses and never
// throw.
//
// Threading: every method is thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/grain_id.h"
#include "core/task.h"

namespace granary::storage {

struct StoredState {
  bool exists = false;
  std::string bytes;  // the serialized state message
  std::string etag;   // "" when nothing is stored
};

class GrainStorage {
 public:
  virtual ~GrainStorage() = default;

  virtual Task<absl::StatusOr<StoredState>> Read(GrainId id) = 0;
  // Stores `bytes` if the stored etag is `expected_etag` ("" = nothing
  // stored yet). The new etag, or ABORTED when `expected_etag` is not the
  // stored one.
  virtual Task<absl::StatusOr<std::string>> Write(
      GrainId id, std::string bytes, std::string expected_etag) = 0;
  // Removes the state if the stored etag is `expected_etag` (else ABORTED).
  // The outcome is the etag the next Write must name: "" from a provider
  // that forgets a cleared state, or the etag of the tombstone a provider
  // keeps so that a writer that read the state before the clear cannot
  // succeed after it (no ABA). Read gives a cleared state exists=false and
  // that etag.
  virtual Task<absl::StatusOr<std::string>> Clear(
      GrainId id, std::string expected_etag) = 0;

  // OK while the store takes writes; UNAVAILABLE with the reason while it
  // cannot (a full disk), when the silo reports itself not ready.
  virtual absl::Status Health() { return absl::OkStatus(); }
  // Failures of the store's own writes so far (a full disk, say; not a
  // stale etag).
  virtual int64_t WriteErrors() { return 0; }
};

// The ABORTED status of a write or clear whose expected etag is stale.
absl::Status StaleEtagError(const GrainId& id, const std::string& expected,
                            const std::string& stored);

}  // namespace granary::storage
