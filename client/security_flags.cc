#include "client/security_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, tls_ca, "",
          "Connect with TLS, trusting gateways whose certificate chains to "
          "this PEM CA.");
ABSL_FLAG(std::string, tls_cert, "",
          "A PEM client certificate to present (mutual TLS; with --tls_key "
          "and --tls_ca).");
ABSL_FLAG(std::string, tls_key, "", "The PEM private key of --tls_cert.");
ABSL_FLAG(std::string, token_file, "",
          "A file holding the bearer token to send on every call "
          "(authorization: Bearer TOKEN).");

namespace granary::client {

absl::StatusOr<rpc::ClientSecurity> ClientSecurityFromFlags() {
  rpc::ClientSecurity s;
  s.ca_file = absl::GetFlag(FLAGS_tls_ca);
  s.cert_file = absl::GetFlag(FLAGS_tls_cert);
  s.key_file = absl::GetFlag(FLAGS_tls_key);
  if (const std::string file = absl::GetFlag(FLAGS_token_file); !file.empty()) {
    absl::StatusOr<std::string> token = rpc::ReadTokenFile(file);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token_file: ", token.status().message()));
    }
    s.token = *std::move(token);
  }
  if (absl::Status st = rpc::ValidateClientSecurity(s, "--tls_ca/--tls_cert");
      !st.ok()) {
    return st;
  }
  return s;
}

}  // namespace granary::client
