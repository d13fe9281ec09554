#include "rpc/credentials.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/address.h"
#include "core/log.h"
#include "core/sync.h"
#include "grpc/grpc_security_constants.h"
#include "grpc/support/log.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/server_context.h"

namespace granary::rpc {
namespace {

constexpr char kIdentityProperty[] = "granary.identity";
constexpr absl::string_view kHealthPrefix = "/grpc.health.v1.Health/";
constexpr size_t kMinTokenLength = 16;

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != '@' && c != ':' && c != '-') {
      return false;
    }
  }
  return true;
}

// Equal in time that depends on the lengths only.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  if (b.empty()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^
            static_cast<unsigned char>(b[i % b.size()]);
  }
  return diff == 0;
}

unsigned ReloadSeconds(absl::Duration reload) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, absl::ToInt64Seconds(reload)));
}

// The bearer-token check: every call but the health service's carries a
// token of the table; the caller's identity becomes its name.
class TokenProcessor final : public grpc::AuthMetadataProcessor {
 public:
  TokenProcessor(std::string path, TokenTable table, absl::Duration reload,
                 AuthCounters* refused)
      : path_(std::move(path)),
        reload_(reload),
        refused_(refused),
        table_(std::make_shared<const TokenTable>(std::move(table))),
        mtime_(FileVersion(path_)),
        next_check_(absl::Now() + reload) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata,
                       grpc::AuthContext* context, OutputMetadata* consumed,
                       OutputMetadata* /*response*/) override {
    auto path = metadata.find(":path");
    if (path != metadata.end() &&
        absl::StartsWith(
            absl::string_view(path->second.data(), path->second.size()),
            kHealthPrefix)) {
      return grpc::Status::OK;
    }
    auto header = metadata.find("authorization");
    if (header == metadata.end()) return Refuse(&refused_missing());
    absl::string_view value(header->second.data(), header->second.size());
    constexpr absl::string_view kScheme = "bearer ";
    if (value.size() <= kScheme.size() ||
        !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
      return Refuse(&refused_wrong());
    }
    value.remove_prefix(kScheme.size());
    std::shared_ptr<const TokenTable> table = Current();
    const std::string* name = table->Find(value);
    if (name == nullptr) return Refuse(&refused_wrong());
    context->AddProperty(kIdentityProperty, *name);
    context->SetPeerIdentityPropertyName(kIdentityProperty);
    consumed->insert(std::make_pair(
        std::string(header->first.data(), header->first.size()),
        std::string(header->second.data(), header->second.size())));
    return grpc::Status::OK;
  }

 private:
  std::atomic<int64_t>& refused_missing() {
    return refused_ != nullptr ? refused_->missing_token : unused_;
  }
  std::atomic<int64_t>& refused_wrong() {
    return refused_ != nullptr ? refused_->wrong_token : unused_;
  }

  grpc::Status Refuse(std::atomic<int64_t>* counter) {
    counter->fetch_add(1, std::memory_order_relaxed);
    // Missing and wrong tokens read the same: which one it was is no
    // business of the caller's.
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "a valid bearer token is required "
                        "(metadata authorization: Bearer TOKEN)");
  }

  // The table, read again first when the file changed.
  std::shared_ptr<const TokenTable> Current() {
    MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (now < next_check_) return table_;
    next_check_ = now + reload_;
    const std::string mtime = FileVersion(path_);
    if (mtime == mtime_) return table_;
    mtime_ = mtime;
    absl::StatusOr<TokenTable> table = ReadTokenTable(path_);
    if (!table.ok()) {
      GRANARY_LOG(kError) << "tokens_file=" << LogQuote(path_)
                          << " not reloaded, keeping the tokens in use: "
                          << table.status().message();
      return table_;
    }
    table_ = std::make_shared<const TokenTable>(*std::move(table));
    GRANARY_LOG(kInfo) << "tokens_file=" << LogQuote(path_)
                       << " tokens=" << table_->size() << " tokens reloaded";
    return table_;
  }

  const std::string path_;
  const absl::Duration reload_;
  AuthCounters* const refused_;
  std::atomic<int64_t> unused_{0};
  Mutex mu_;
  std::shared_ptr<const TokenTable> table_ ABSL_GUARDED_BY(mu_);
  std::string mtime_ ABSL_GUARDED_BY(mu_);
  absl::Time next_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text) {
  TokenTable table;
  absl::flat_hash_set<std::string> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokens file line ", line_number, ": expected NAME TOKEN, found ",
          fields.size(), " fields"));
    }
    if (!ValidName(fields[0])) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens file line ", line_number,
                       ": a name is 1-128 of [A-Za-z0-9._@:-]"));
    }
    if (fields[1].size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokens file line ", line_number, ": a token has at least ",
          kMinTokenLength, " characters"));
    }
    for (unsigned char c : fields[1]) {
      if (c < 0x20 || c == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokens file line ", line_number,
                         ": a token holds no control characters"));
      }
    }
    if (!tokens.emplace(fields[1]).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokens file line ", line_number, ": the token of an earlier line"));
    }
    table.entries_.emplace_back(std::string(fields[0]), std::string(fields[1]));
  }
  if (table.entries_.empty()) {
    return absl::InvalidArgumentError("tokens file holds no NAME TOKEN line");
  }
  return table;
}

absl::StatusOr<TokenTable> ReadTokenTable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens file '", path, "' cannot be read"));
  }
  absl::StatusOr<TokenTable> table = TokenTable::Parse(text.str());
  if (!table.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': ", table.status().message()));
  }
  return table;
}

const std::string* TokenTable::Find(absl::string_view token) const {
  const std::string* found = nullptr;
  for (const auto& [name, expected] : entries_) {
    // No early exit: every entry is compared.
    if (ConstantTimeEquals(token, expected) && found == nullptr) {
      found = &name;
    }
  }
  return found;
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const ClientSecurity& s) {
  if (!s.tls()) return grpc::InsecureChannelCredentials();
  // One set of credentials (and so one file watcher) per distinct setting,
  // however many channels use it.
  static Mutex mu;
  static auto* cache =
      new absl::flat_hash_map<std::string,
                              std::shared_ptr<grpc::ChannelCredentials>>();
  const std::string key =
      absl::StrCat(s.ca_file, "\n", s.cert_file, "\n", s.key_file, "\n",
                   s.check_hostname, "\n", ReloadSeconds(s.reload));
  MutexLock lock(&mu);
  std::shared_ptr<grpc::ChannelCredentials>& cached = (*cache)[key];
  if (cached != nullptr) return cached;
  const unsigned refresh = ReloadSeconds(s.reload);
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider =
      s.cert_file.empty()
          ? std::make_shared<
                grpc::experimental::FileWatcherCertificateProvider>(s.ca_file,
                                                                    refresh)
          : std::make_shared<
                grpc::experimental::FileWatcherCertificateProvider>(
                s.key_file, s.cert_file, s.ca_file, refresh);
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(std::move(provider));
  options.watch_root_certs();
  if (!s.cert_file.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  if (s.check_hostname) {
    options.set_certificate_verifier(
        std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  } else {
    // The chain to the CA is verified all the same; only the name is not.
    options.set_certificate_verifier(
        std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
    options.set_check_call_host(false);
  }
  cached = grpc::experimental::TlsCredentials(options);
  return cached;
}

void AddCallToken(grpc::ClientContext* context, const ClientSecurity& s) {
  if (!s.token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", s.token));
  }
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerSecurity& s, AuthCounters* refused) {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (s.tls()) {
    const unsigned refresh = ReloadSeconds(s.reload);
    std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider =
        s.client_ca_file.empty()
            ? std::make_shared<
                  grpc::experimental::FileWatcherCertificateProvider>(
                  s.key_file, s.cert_file, refresh)
            : std::make_shared<
                  grpc::experimental::FileWatcherCertificateProvider>(
                  s.key_file, s.cert_file, s.client_ca_file, refresh);
    grpc::experimental::TlsServerCredentialsOptions options(
        std::move(provider));
    options.watch_identity_key_cert_pairs();
    if (!s.client_ca_file.empty()) {
      options.watch_root_certs();
      options.set_cert_request_type(
          GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    } else {
      options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    }
    creds = grpc::experimental::TlsServerCredentials(options);
  } else if (!s.tokens_file.empty()) {
    // Plaintext with tokens: local credentials carry the token check and
    // accept loopback peers only; on the wire they are plain HTTP/2, so
    // any plaintext gRPC client connects.
    creds = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
  } else {
    return grpc::InsecureServerCredentials();
  }
  if (!s.tokens_file.empty()) {
    absl::StatusOr<TokenTable> table = ReadTokenTable(s.tokens_file);
    if (!table.ok()) return table.status();
    creds->SetAuthMetadataProcessor(std::make_shared<TokenProcessor>(
        s.tokens_file, *std::move(table), s.reload, refused));
  }
  return creds;
}

namespace {

std::atomic<int64_t> handshake_failures{0};

void OnGrpcLog(gpr_log_func_args* args) {
  const absl::string_view message =
      args->message != nullptr ? args->message : "";
  if (absl::StrContains(message, "Handshake failed")) {
    handshake_failures.fetch_add(1, std::memory_order_relaxed);
  }
  absl::string_view file = args->file != nullptr ? args->file : "";
  if (size_t slash = file.rfind('/'); slash != absl::string_view::npos) {
    file.remove_prefix(slash + 1);
  }
  const std::string source = absl::StrCat(file, ":", args->line);
  switch (args->severity) {
    case GPR_LOG_SEVERITY_ERROR:
      // Failed handshakes and the like: a remote peer causes them at will.
      GRANARY_LOG_EVERY(kError, absl::Seconds(1))
          << "grpc_source=" << LogQuote(source) << " " << message;
      break;
    case GPR_LOG_SEVERITY_INFO:
      GRANARY_LOG(kInfo) << "grpc_source=" << LogQuote(source) << " "
                         << message;
      break;
    default:
      GRANARY_LOG(kDebug) << "grpc_source=" << LogQuote(source) << " "
                          << message;
  }
}

}  // namespace

std::string CanonicalHost(absl::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string text = absl::AsciiStrToLower(host);
  char buf[INET6_ADDRSTRLEN];
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1 &&
      inet_ntop(AF_INET, &v4, buf, sizeof(buf)) != nullptr) {
    return buf;
  }
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1 &&
      inet_ntop(AF_INET6, &v6, buf, sizeof(buf)) != nullptr) {
    return buf;
  }
  return text;
}

void RouteGrpcLogs() {
  static const bool routed = [] {
    gpr_set_log_function(&OnGrpcLog);
    return true;
  }();
  (void)routed;
}

int64_t TlsHandshakeFailures() {
  return handshake_failures.load(std::memory_order_relaxed);
}

std::string SiloOfUri(absl::string_view uri) {
  if (!absl::StartsWithIgnoreCase(uri, kSiloUriScheme)) return "";
  uri.remove_prefix(kSiloUriScheme.size());
  if (!uri.empty() && uri.back() == '/') uri.remove_suffix(1);
  std::string host;
  int port = 0;
  if (!SplitHostPort(std::string(uri), &host, &port) || port <= 0 ||
      host.empty()) {
    return "";
  }
  return absl::StrCat(CanonicalHost(host), ":", port);
}

bool PeerAuthority::Covers(absl::string_view silo) const {
  if (any) return true;
  if (size_t at = silo.rfind('@'); at != absl::string_view::npos) {
    silo = silo.substr(0, at);
  }
  std::string host;
  int port = 0;
  if (!SplitHostPort(std::string(silo), &host, &port)) return false;
  host = CanonicalHost(host);
  if (!silos.empty()) {
    const std::string exact = absl::StrCat(host, ":", port);
    for (const std::string& s : silos) {
      if (s == exact) return true;
    }
    return false;
  }
  for (const std::string& h : hosts) {
    if (h == host) return true;
  }
  return false;
}

PeerAuthority AuthorityOf(const grpc::ServerContextBase& context) {
  PeerAuthority authority;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  bool tls = false;
  if (auth != nullptr) {
    for (const grpc::string_ref& type :
         auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME)) {
      // "ssl" (SSL credentials) or "tls" (TLS credentials, used here).
      tls = tls || type == GRPC_SSL_TRANSPORT_SECURITY_TYPE ||
            type == GRPC_TLS_TRANSPORT_SECURITY_TYPE;
    }
  }
  if (!tls) {
    authority.any = true;
    return authority;
  }
  if (!auth->IsPeerAuthenticated()) return authority;  // no certificate
  for (const char* property :
       {GRPC_X509_SAN_PROPERTY_NAME, GRPC_PEER_DNS_PROPERTY_NAME,
        GRPC_PEER_IP_PROPERTY_NAME}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(property)) {
      authority.hosts.push_back(
          CanonicalHost(absl::string_view(v.data(), v.size())));
    }
  }
  for (const grpc::string_ref& v :
       auth->FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
    std::string silo = SiloOfUri(absl::string_view(v.data(), v.size()));
    if (!silo.empty()) authority.silos.push_back(std::move(silo));
  }
  return authority;
}

std::string CallerIdentity(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return "";
  for (const char* property :
       {kIdentityProperty, GRPC_X509_SUBJECT_PROPERTY_NAME}) {
    std::vector<grpc::string_ref> values = auth->FindPropertyValues(property);
    if (!values.empty()) {
      return std::string(values.front().data(), values.front().size());
    }
  }
  return "";
}

}  // namespace granary::rpc
