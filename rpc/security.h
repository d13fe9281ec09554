// File: rpc/security.h
// -----------------------------------------------------------------------------
// What a gRPC endpoint of Granary presents and trusts: TLS certificates,
// client certificates and bearer tokens. Plain settings, no gRPC types; the
// credentials they make are in rpc/credentials.h.
//
//   ServerSecurity gateway;                    // granary-silo --tls_* flags
//   gateway.cert_file = "gateway.pem";         // serve TLS
//   gateway.key_file = "gateway.key";
//   gateway.client_ca_file = "ca.pem";         // and require client certs
//   gateway.tokens_file = "tokens";            // and a bearer token
//
//   ClientSecurity client;                     // the SDK, CLI, benchmark
//   client.ca_file = "ca.pem";                 // TLS, trusting this CA
//   client.cert_file = "client.pem";           // a client certificate
//   client.key_file = "client.key";
//   client.token = *ReadTokenFile("token");    // a bearer token
//
// Certificate files are PEM. They are read again while the endpoint runs
// (every `reload`), so replacing them rotates the certificates without a
// restart; replace a certificate and its key together (write both, then
// rename them into place).
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/sync.h"

namespace granary::rpc {

struct ServerSecurity {
  // The endpoint's certificate chain and private key: both or neither;
  // with them the endpoint speaks TLS only.
  std::string cert_file;
  std::string key_file;
  // With TLS: clients must present a certificate that chains to this CA.
  std::string client_ca_file;
  // Every call but the health service's must carry
  // `authorization: Bearer TOKEN` with a token of this file
  // (rpc/credentials.h has its format).
  std::string tokens_file;
  // How often the files are checked for changes.
  absl::Duration reload = absl::Seconds(10);

  bool tls() const { return !cert_file.empty(); }
  bool any() const { return tls() || !tokens_file.empty(); }
};

struct ClientSecurity {
  // TLS, trusting servers whose certificate chains to this CA (empty:
  // plaintext).
  std::string ca_file;
  // A client certificate and its key (mutual TLS): both or neither.
  std::string cert_file;
  std::string key_file;
  // Sent as `authorization: Bearer TOKEN` on every call.
  std::string token;
  // The server's certificate must name the host dialled (silos dialling
  // silos check it too: a silo's certificate names its own host).
  bool check_hostname = true;
  absl::Duration reload = absl::Seconds(10);

  bool tls() const { return !ca_file.empty(); }
};

// OK, or INVALID_ARGUMENT naming `flag_prefix`'s flag that is wrong: a
// certificate without its key, a file that cannot be read or holds no PEM
// certificate / private key, a client CA without TLS, a reload interval
// under a second.
absl::Status ValidateServerSecurity(const ServerSecurity& s,
                                    const std::string& what);
absl::Status ValidateClientSecurity(const ClientSecurity& s,
                                    const std::string& what);

// OK unless `s` would send its bearer token in clear text to `address`
// (HOST:PORT) off loopback: a token with no TLS goes only to 127.0.0.0/8,
// ::1 or localhost. INVALID_ARGUMENT saying so otherwise (and for a
// malformed address).
absl::Status CheckTokenTransport(const ClientSecurity& s,
                                 const std::string& address);

// OK when the PEM certificate (the first) in `cert_file` names `host`: an
// IP address SAN for an address, else a DNS name SAN (OpenSSL's
// X509_check_ip_asc and X509_check_host). INVALID_ARGUMENT saying which
// otherwise.
absl::Status CertificateNames(const std::string& cert_file,
                              const std::string& host);

// OK when the PEM certificate (the first) in `cert_file`, with the other
// certificates of that file as intermediates, chains to a CA of `ca_file`
// and is valid now. INVALID_ARGUMENT saying why not otherwise.
absl::Status CertificateChainsTo(const std::string& cert_file,
                                 const std::string& ca_file);

// A bearer token from a file: its contents without surrounding whitespace.
// INVALID_ARGUMENT if it cannot be read, is empty, or holds whitespace or
// control characters inside.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// What tells one version of a file from the next: its modification and
// change times, size and inode ("" when it cannot be read).
std::string FileVersion(const std::string& path);

// A bearer token read from a file and read again, at most every `reload`,
// when the file has changed; a file that no longer reads as a token (empty,
// gone) leaves the token in use (logged). Thread-safe.
class ReloadingToken {
 public:
  // INVALID_ARGUMENT as ReadTokenFile.
  static absl::StatusOr<std::unique_ptr<ReloadingToken>> Open(
      const std::string& path, absl::Duration reload);

  // The token in force now.
  std::string Current();

 private:
  ReloadingToken(std::string path, absl::Duration reload, std::string token);

  const std::string path_;
  const absl::Duration reload_;
  Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  std::string version_ ABSL_GUARDED_BY(mu_);
  absl::Time next_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::rpc
