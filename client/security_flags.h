// File: client/security_flags.h
// -----------------------------------------------------------------------------
// The flags with which client programs (`granary`, `granary-bench`) reach a
// gateway that speaks TLS or wants a bearer token:
//   --tls_ca=FILE     trust gateways whose certificate chains to this CA
//   --tls_cert=FILE   present this client certificate (with --tls_key)
//   --tls_key=FILE
//   --token_file=FILE send the bearer token this file holds
//
//   absl::StatusOr<rpc::ClientSecurity> security = ClientSecurityFromFlags();
//   if (!security.ok()) { ...print, exit 2... }
//   options.security = *security;
#pragma once

#include "absl/status/statusor.h"
#include "rpc/security.h"

namespace granary::client {

// INVALID_ARGUMENT naming the flag that is wrong (a certificate without its
// key, a file that cannot be read, an empty token file).
absl::StatusOr<rpc::ClientSecurity> ClientSecurityFromFlags();

}  // namespace granary::client
