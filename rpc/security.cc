#include "rpc/security.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/address.h"
#include "core/log.h"
#include "core/status.h"

namespace granary::rpc {
namespace {

// The file's contents, or INVALID_ARGUMENT naming `flag`.
absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "='", path, "' cannot be read"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "='", path, "' cannot be read"));
  }
  return text.str();
}

absl::Status ExpectPem(const std::string& path, const std::string& flag,
                       bool key) {
  absl::StatusOr<std::string> text = ReadFile(path, flag);
  if (!text.ok()) return text.status();
  const bool ok = key ? absl::StrContains(*text, "PRIVATE KEY-----")
                      : absl::StrContains(*text, "-----BEGIN CERTIFICATE-----");
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "='", path, "' holds no PEM ",
                     key ? "private key" : "certificate"));
  }
  return absl::OkStatus();
}

// A certificate and its key, both PEM.
absl::Status ExpectPair(const std::string& cert, const std::string& key,
                        const std::string& what) {
  GRANARY_RETURN_IF_ERROR(ExpectPem(cert, what + " certificate", false));
  return ExpectPem(key, what + " key", true);
}

bool HasSpaceOrControl(absl::string_view text) {
  for (unsigned char c : text) {
    if (c <= 0x20 || c == 0x7f) return true;
  }
  return false;
}

absl::Status ValidateReload(absl::Duration reload, const std::string& what) {
  if (reload < absl::Seconds(1) || reload == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        ": the certificate reload interval must be at least 1s and "
        "finite"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateServerSecurity(const ServerSecurity& s,
                                    const std::string& what) {
  if (s.cert_file.empty() != s.key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": a TLS certificate needs its key and a key its certificate"));
  }
  if (!s.tls() && !s.client_ca_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": client certificates need TLS (a certificate and key)"));
  }
  if (s.tls())
    GRANARY_RETURN_IF_ERROR(ExpectPair(s.cert_file, s.key_file, what));
  if (!s.client_ca_file.empty()) {
    GRANARY_RETURN_IF_ERROR(
        ExpectPem(s.client_ca_file, what + " client CA", false));
  }
  return ValidateReload(s.reload, what);
}

absl::Status ValidateClientSecurity(const ClientSecurity& s,
                                    const std::string& what) {
  if (s.cert_file.empty() != s.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": a client certificate needs its key and a key its "
                     "certificate"));
  }
  if (!s.tls() && !s.cert_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": a client certificate needs TLS (the CA to trust)"));
  }
  if (s.tls())
    GRANARY_RETURN_IF_ERROR(ExpectPem(s.ca_file, what + " CA", false));
  if (!s.cert_file.empty()) {
    GRANARY_RETURN_IF_ERROR(ExpectPair(s.cert_file, s.key_file, what));
  }
  if (HasSpaceOrControl(s.token)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": a bearer token holds no whitespace or control characters"));
  }
  return ValidateReload(s.reload, what);
}

absl::Status CheckTokenTransport(const ClientSecurity& s,
                                 const std::string& address) {
  if (s.token.empty() || s.tls()) return absl::OkStatus();
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad gateway address '", address, "' (want HOST:PORT)"));
  }
  if (IsLoopbackHost(host)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "refusing to send a bearer token in clear text to ", address,
      ", which is off loopback: give the CA to trust (--tls_ca) so the "
      "connection uses TLS"));
}

absl::Status CertificateNames(const std::string& cert_file,
                              const std::string& host) {
  BIO* bio = BIO_new_file(cert_file.c_str(), "r");
  if (bio == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", cert_file, "' cannot be read"));
  }
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", cert_file, "' holds no PEM certificate"));
  }
  const bool named =
      X509_check_ip_asc(cert, host.c_str(), 0) == 1 ||
      X509_check_host(cert, host.data(), host.size(), 0, nullptr) == 1;
  X509_free(cert);
  if (!named) {
    return absl::InvalidArgumentError(
        absl::StrCat("the certificate '", cert_file,
                     "' does not name the host '", host, "'"));
  }
  return absl::OkStatus();
}

absl::Status CertificateChainsTo(const std::string& cert_file,
                                 const std::string& ca_file) {
  // Every PEM certificate of `path`, in order; empty if none.
  const auto read_all = [](const std::string& path) {
    std::vector<X509*> certs;
    BIO* bio = BIO_new_file(path.c_str(), "r");
    if (bio == nullptr) return certs;
    while (X509* c = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
      certs.push_back(c);
    }
    ERR_clear_error();  // the end of the file reads as an error
    BIO_free(bio);
    return certs;
  };
  std::vector<X509*> chain = read_all(cert_file);
  std::vector<X509*> cas = read_all(ca_file);
  X509_STORE* store = X509_STORE_new();
  STACK_OF(X509)* untrusted = sk_X509_new_null();
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  absl::Status result;
  if (chain.empty()) {
    result = absl::InvalidArgumentError(
        absl::StrCat("'", cert_file, "' holds no PEM certificate"));
  } else if (cas.empty()) {
    result = absl::InvalidArgumentError(
        absl::StrCat("'", ca_file, "' holds no PEM certificate"));
  } else {
    for (X509* ca : cas) X509_STORE_add_cert(store, ca);
    for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(untrusted, chain[i]);
    if (X509_STORE_CTX_init(ctx, store, chain[0], untrusted) != 1 ||
        X509_verify_cert(ctx) != 1) {
      result = absl::InvalidArgumentError(absl::StrCat(
          "the certificate '", cert_file, "' does not chain to a CA of '",
          ca_file,
          "': ", X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx))));
    }
  }
  X509_STORE_CTX_free(ctx);
  sk_X509_free(untrusted);
  X509_STORE_free(store);  // frees its references to the CAs
  for (X509* c : cas) X509_free(c);
  for (X509* c : chain) X509_free(c);
  return result;
}

std::string FileVersion(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, "/",
                      st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec, "/",
                      st.st_size, "/", st.st_ino);
}

ReloadingToken::ReloadingToken(std::string path, absl::Duration reload,
                               std::string token)
    : path_(std::move(path)),
      reload_(reload),
      token_(std::move(token)),
      version_(FileVersion(path_)),
      next_check_(absl::Now() + reload_) {}

absl::StatusOr<std::unique_ptr<ReloadingToken>> ReloadingToken::Open(
    const std::string& path, absl::Duration reload) {
  absl::StatusOr<std::string> token = ReadTokenFile(path);
  if (!token.ok()) return token.status();
  return std::unique_ptr<ReloadingToken>(
      new ReloadingToken(path, reload, *std::move(token)));
}

std::string ReloadingToken::Current() {
  MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (now < next_check_) return token_;
  next_check_ = now + reload_;
  std::string version = FileVersion(path_);
  if (version == version_) return token_;
  version_ = std::move(version);
  absl::StatusOr<std::string> token = ReadTokenFile(path_);
  if (!token.ok()) {
    GRANARY_LOG(kError) << "token file " << LogQuote(path_)
                        << " not reloaded, keeping the token in use: "
                        << token.status().message();
    return token_;
  }
  if (*token != token_) {
    token_ = *std::move(token);
    GRANARY_LOG(kInfo) << "token file " << LogQuote(path_) << " reloaded";
  }
  return token_;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "token file");
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file '", path, "' is empty"));
  }
  if (HasSpaceOrControl(token)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file '", path,
        "' holds whitespace or control characters inside the token"));
  }
  return token;
}

}  // namespace granary::rpc
