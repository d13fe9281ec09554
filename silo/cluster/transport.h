// File: silo/cluster/transport.h
// -----------------------------------------------------------------------------
// Silo-to-silo messaging: grain calls passed on to the silo that hosts the
// grain, directory requests and rebuild reports to a grain's owner
// (directory/directory_transport.h), and liveness probes. Two
// implementations: GrpcTransport (silo/cluster/grpc_transport.h) between
// silo processes, and LoopbackTransport (testing/loopback_transport.h)
// between silos of one process, whose links a test can drop, delay and
// partition.
//
//   transport->OnView(view);                 // connects to the live silos
//   if (!transport->TrySend(silo_id, call)) { /* not connected yet */ }
//   transport->SendDirectory(owner, DirectoryOp::kLookup, request, done);
//   transport->Probe(silo_id, address, request, timeout, done);
//
// A call to a silo that is unknown, declared Dead without leaving, or whose
// connection is lost fails at once with UNAVAILABLE (never a timeout).
//
// Threading: thread-safe. Completions run inline or on the transport's
// threads and must not block.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "directory/directory_transport.h"
#include "granary/v1/cluster.pb.h"

namespace granary::silo {

class Transport : public directory::DirectoryTransport {
 public:
  using ProbeDone = std::function<void(absl::StatusOr<v1::ProbeReply>)>;

  ~Transport() override = default;

  // Starts the transport's threads, if it has any.
  virtual absl::Status Start() { return absl::OkStatus(); }
  // Connects to the live members of `view` not connected yet (in the
  // background) and drops the others: calls in flight to a silo that left
  // gracefully get their answers, those to one declared dead fail.
  virtual void OnView(const v1::MembershipView& view) = 0;

  // Sends `call` (taking the caller's reference) to silo `silo_id`.
  virtual void Send(const std::string& silo_id, CallBase* call) = 0;
  // Like Send, but false (and `call` untouched) while there is no
  // connection to `silo_id`.
  virtual bool TrySend(const std::string& silo_id, CallBase* call) = 0;
  // Whether TrySend would take calls for `silo_id` now.
  virtual bool IsConnected(const std::string& silo_id) const = 0;
  // Ids of the silos connected now.
  virtual std::vector<std::string> connected() const = 0;

  // Asks the silo at `address` (its silo endpoint) for its id.
  virtual void Probe(const std::string& address, v1::ProbeRequest request,
                     absl::Duration timeout, ProbeDone done) = 0;

  using MigrationDone = std::function<void(absl::StatusOr<v1::MigrationReply>)>;
  // Hands an activation to silo `silo_id` (SiloControl.AcceptMigration);
  // UNAVAILABLE when it cannot be reached, DEADLINE_EXCEEDED after
  // `timeout`.
  virtual void SendMigration(const std::string& silo_id,
                             v1::MigrationRequest request,
                             absl::Duration timeout, MigrationDone done) = 0;

  // Closes every connection; later sends fail UNAVAILABLE. Idempotent.
  virtual void Stop() = 0;
};

}  // namespace granary::silo
