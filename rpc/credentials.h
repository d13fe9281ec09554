// File: rpc/credentials.h
// -----------------------------------------------------------------------------
// gRPC credentials from the settings of rpc/security.h, and the bearer-token
// check servers run.
//
//   auto creds = MakeServerCredentials(security, &refused);   // a server
//   builder.AddListeningPort(address, *creds, &port);
//   ...in a handler: CallerIdentity(*context)                  // "dev-client"
//
//   auto channel = grpc::CreateChannel(address,
//                                      MakeChannelCredentials(client));
//   grpc::ClientContext context;
//   AddCallToken(&context, client);                            // a client
//
// Certificates come from gRPC's file-watcher provider, so changed files are
// picked up every `reload` with no restart; connections already open keep
// the certificates they were made with. A tokens file is read again when
// its modification time changes (checked at most every `reload`); a file
// that no longer parses is logged and the last good table kept.
//
// The tokens file has one `NAME TOKEN` pair per line; `#` starts a comment,
// blank lines are ignored. Names are 1-128 of [A-Za-z0-9._@:-]; tokens at
// least 16 characters without whitespace. No token may appear twice.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rpc/security.h"

namespace grpc {
class ChannelCredentials;
class ClientContext;
class ServerContextBase;
class ServerCredentials;
}  // namespace grpc

namespace granary::rpc {

// Calls a server refused for their bearer token.
struct AuthCounters {
  std::atomic<int64_t> missing_token{0};
  std::atomic<int64_t> wrong_token{0};
};

// The NAME TOKEN pairs of a tokens file.
class TokenTable {
 public:
  // INVALID_ARGUMENT naming the line that is wrong (never quoting a token).
  static absl::StatusOr<TokenTable> Parse(absl::string_view text);

  // The name of `token`, or nullptr. Compares against every token in time
  // that depends only on the lengths involved, not on where they differ.
  const std::string* Find(absl::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;  // name, token
};

// The table of a tokens file; INVALID_ARGUMENT naming the file when it
// cannot be read or parsed.
absl::StatusOr<TokenTable> ReadTokenTable(const std::string& path);

// Plaintext, or TLS trusting `s.ca_file` (with the client certificate if
// given). The token is not part of them: see AddCallToken. Equal settings
// share one set of credentials (one file watcher) for the process's life.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const ClientSecurity& s);

// Adds `authorization: Bearer TOKEN` to the call when `s` has a token.
void AddCallToken(grpc::ClientContext* context, const ClientSecurity& s);

// TLS (requiring client certificates with a client CA) or plaintext, and
// with a tokens file the bearer-token check on every call but the health
// service's. A plaintext server with tokens accepts loopback peers only
// (tokens must not cross a network in the clear). `refused` (may be null)
// counts refusals; it must outlive the server. INVALID_ARGUMENT when the
// tokens file cannot be read or parsed.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerSecurity& s, AuthCounters* refused);

// The identity a call was accepted with: the bearer token's name, else the
// subject of the client's certificate; empty when the caller is anonymous.
std::string CallerIdentity(const grpc::ServerContextBase& context);

// Routes gRPC's own log lines into Granary's log (core/log.h, with a
// grpc_source= field) and counts the TLS handshakes gRPC refuses (no
// client certificate, one of another CA or expired, a plaintext peer of a
// TLS port, a server certificate this process does not trust): those never
// reach Granary's code otherwise. Idempotent; process-wide.
void RouteGrpcLogs();
// Handshakes refused since RouteGrpcLogs, by this process as server or
// client.
int64_t TlsHandshakeFailures();

// The hosts the peer of a call on the silo port speaks for. Over TLS, the
// DNS names and IP addresses its certificate names (a silo's certificate
// names the hosts it runs on), and nothing if it presented none. Without
// TLS nothing identifies a peer, so there is nothing to hold it to: it
// speaks for every host.
// The silos a peer of the silo port speaks for, from its certificate:
//   - URI SANs "granary-silo://HOST:PORT" name silo endpoints exactly, and
//     a certificate with any of them speaks for those endpoints alone (a
//     certificate per silo, however many silos share a host);
//   - otherwise its DNS and IP SANs name hosts, and it speaks for every
//     silo on them (a certificate per host, or a pod's certificate).
struct PeerAuthority {
  std::vector<std::string> hosts;  // lower case; IP addresses canonical
  std::vector<std::string> silos;  // "host:port", host as in `hosts`
  bool any = false;

  // Whether the peer speaks for the silo `silo` names: "HOST:PORT" or a
  // silo id "HOST:PORT@generation".
  bool Covers(absl::string_view silo) const;
};
// The URI SAN scheme that names one silo endpoint.
inline constexpr absl::string_view kSiloUriScheme = "granary-silo://";
// "host:port" of a "granary-silo://HOST:PORT" URI (host canonical), or ""
// when `uri` is not one.
std::string SiloOfUri(absl::string_view uri);
PeerAuthority AuthorityOf(const grpc::ServerContextBase& context);

// `host` lower case, an IP address in its canonical text (no brackets).
std::string CanonicalHost(absl::string_view host);

}  // namespace granary::rpc
