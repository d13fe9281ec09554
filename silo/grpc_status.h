// File: silo/grpc_status.h
// -----------------------------------------------------------------------------
// absl::Status <-> grpc::Status with the code and message preserved (both use
// the canonical google.rpc codes).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace granary::silo {

inline grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

inline absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

}  // namespace granary::silo
