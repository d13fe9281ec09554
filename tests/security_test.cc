// TLS, client certificates and bearer tokens on a real silo (SiloHost in
// this process, the test grains): the gateway and HTTP ports with the wrong
// or missing credential are refused with the right status and counted, the
// accepted identity reaches grain code, and off-loopback plaintext is
// refused at start. Connections that age out and certificates that rotate
// are connection_rotation_test's, the silo port silo_authorization_test's.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/credentials.h"
#include "silo/silo_host.h"
#include "tests/process_util.h"
#include "tests/test_grains.granary.h"
#include "tests/test_grains.h"
#include "tests/tls_fixture.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::testing::HasSubstr;

TEST(TokenTableTest, ParsesNamesTokensAndComments) {
  absl::StatusOr<rpc::TokenTable> table = rpc::TokenTable::Parse(
      "# NAME TOKEN\n"
      "\n"
      "alice 0123456789abcdef0123  # trailing comment\n"
      "  bob\tfedcba9876543210fedc\r\n");
  ASSERT_THAT(table.status(), IsOk());
  EXPECT_EQ(table->size(), 2u);
  ASSERT_NE(table->Find("0123456789abcdef0123"), nullptr);
  EXPECT_EQ(*table->Find("0123456789abcdef0123"), "alice");
  EXPECT_EQ(*table->Find("fedcba9876543210fedc"), "bob");
  EXPECT_EQ(table->Find("0123456789abcdef012"), nullptr);    // a prefix
  EXPECT_EQ(table->Find("0123456789abcdef01234"), nullptr);  // longer
  EXPECT_EQ(table->Find(""), nullptr);
  EXPECT_EQ(table->Find("0123456789abcdef0124"), nullptr);
}

TEST(TokenTableTest, RefusesBadFilesNamingTheLineNotTheToken) {
  const std::string secret = "s3cr3t-s3cr3t-s3cr3t";
  for (const auto& [text, why] :
       std::vector<std::pair<std::string, std::string>>{
           {"", "holds no NAME TOKEN line"},
           {"# only a comment\n", "holds no NAME TOKEN line"},
           {"alice\n", "line 1: expected NAME TOKEN"},
           {"alice " + secret + " extra\n", "line 1: expected NAME TOKEN"},
           {"alice short\n", "line 1: a token has at least 16"},
           {"al/ice " + secret + "\n", "line 1: a name is"},
           {"a " + secret + "\nb " + secret + "\n",
            "line 2: the token of an earlier line"},
           {"a " + secret + "\x01" + "\n", "line 1: a token holds no control"},
       }) {
    absl::StatusOr<rpc::TokenTable> table = rpc::TokenTable::Parse(text);
    EXPECT_THAT(table.status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(why)))
        << text;
    EXPECT_THAT(std::string(table.status().message()),
                ::testing::Not(HasSubstr(secret)));
  }
}

// A bearer token never travels in clear text off loopback: the client
// refuses before it connects (a plain server there would read it).
TEST(ClientSecurityTest, ATokenIsNotSentInClearTextOffLoopback) {
  rpc::ClientSecurity s;
  s.token = "secret-token";
  for (const char* local :
       {"127.0.0.1:1", "127.3.4.5:1", "[::1]:1", "localhost:1"}) {
    EXPECT_THAT(rpc::CheckTokenTransport(s, local), IsOk()) << local;
  }
  for (const char* remote :
       {"10.1.2.3:443", "[fd00::1]:443", "gateway.example:443"}) {
    EXPECT_THAT(
        rpc::CheckTokenTransport(s, remote),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("clear text")))
        << remote;
  }
  EXPECT_THAT(
      rpc::CheckTokenTransport(s, "no-port"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("HOST:PORT")));
  rpc::ClientSecurity no_token;
  EXPECT_THAT(rpc::CheckTokenTransport(no_token, "10.1.2.3:443"), IsOk());
  rpc::ClientSecurity tls = s;
  tls.ca_file = Certs::Get().a("ca.pem");
  EXPECT_THAT(rpc::CheckTokenTransport(tls, "10.1.2.3:443"), IsOk());

  ClientOptions options;
  options.gateways = {"127.0.0.1:1", "10.1.2.3:443"};
  options.security = s;
  options.connect_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  EXPECT_THAT(client.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("10.1.2.3:443")));
}

TEST(ClientSecurityTest, RefusesHalfConfigurationsAndUnreadableFiles) {
  const Certs& c = Certs::Get();
  rpc::ClientSecurity s;
  s.cert_file = c.a("client.pem");
  EXPECT_THAT(rpc::ValidateClientSecurity(s, "client"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key")));
  s.key_file = c.a("client.key");
  EXPECT_THAT(rpc::ValidateClientSecurity(s, "client"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("TLS")));
  s.ca_file = c.dir() + "/missing.pem";
  EXPECT_THAT(rpc::ValidateClientSecurity(s, "client"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot be read")));
  s.ca_file = c.a("client.key");  // a key where a certificate belongs
  EXPECT_THAT(rpc::ValidateClientSecurity(s, "client"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no PEM certificate")));
  s.ca_file = c.a("ca.pem");
  EXPECT_THAT(rpc::ValidateClientSecurity(s, "client"), IsOk());
  s.token = "has space";
  EXPECT_THAT(rpc::ValidateClientSecurity(s, "client"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(rpc::CertificateChainsTo(c.a("silo.pem"), c.a("cluster-ca.pem")),
              IsOk());
  EXPECT_THAT(rpc::CertificateChainsTo(c.a("silo.pem"), c.a("ca.pem")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unable to get local issuer certificate")));
  EXPECT_THAT(rpc::CertificateChainsTo(c.a("token"), c.a("ca.pem")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no PEM certificate")));
  EXPECT_THAT(rpc::CertificateChainsTo(c.a("silo.pem"), c.dir() + "/missing"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no PEM certificate")));
  EXPECT_THAT(rpc::ReadTokenFile(c.dir() + "/missing").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(rpc::ReadTokenFile(c.a("token")), IsOk());
}

TEST(SecureByDefaultTest, OffLoopbackWithoutTlsIsRefusedAtStart) {
  const Certs& c = Certs::Get();
  struct Case {
    std::function<void(silo::SiloHostOptions&)> set;
    std::string why;
  };
  for (const Case& k : std::vector<Case>{
           {[](auto& o) { o.gateway = "0.0.0.0:0"; }, "--allow_plaintext"},
           {[](auto& o) {
              o.gateway = "0.0.0.0:0";
              o.allow_plaintext = true;
            },
            "--allow_anonymous"},
           {[](auto& o) {
              // TLS, but neither tokens nor client certificates.
              o = WithGatewayTls(o);
              o.gateway = "0.0.0.0:0";
            },
            "authenticates no client"},
           {[](auto& o) {
              o.cluster = "dev";
              o.primary = "10.1.2.3:11111";
            },
            "--primary='10.1.2.3:11111' is not a loopback address"},
           {[](auto& o) { o.silo = "0.0.0.0:0"; }, "--cluster_ca"},
           {[](auto& o) { o.silo_advertise = "10.1.2.3:5000"; },
            "--cluster_ca"},
           {[&c](auto& o) {
              o.gateway = "0.0.0.0:0";
              o.allow_plaintext = true;
              o.auth_tokens = c.a("tokens");
            },
            "in the clear"},
           {[](auto& o) { o.http = "0.0.0.0:0"; }, "--http_token_file"},
           {[&c](auto& o) {
              o.gateway = "127.0.0.2:0";
              o.auth_tokens = c.a("tokens");
            },
            "127.0.0.1, ::1 or localhost only"},
           {[&c](auto& o) {
              o.cluster = "dev";
              o.auth_tokens = c.a("tokens");
            },
            "authenticate the silos"},
           {[&c](auto& o) {
              o = WithGatewayTls(o);
              o.cluster = "dev";
              o.tls_client_ca = c.a("ca.pem");
            },
            "authenticate the silos"},
           {[&c](auto& o) { o.cluster_ca = c.a("cluster-ca.pem"); },
            "go together"},
           {[&c](auto& o) {
              // A certificate of the gateway's CA, not the cluster's.
              o = WithClusterTls(o);
              o.cluster_tls_cert = c.a("gateway.pem");
              o.cluster_tls_key = c.a("gateway.key");
            },
            "does not chain to a CA of"},
           {[](auto& o) {
              o = WithClusterTls(o);
              o.silo = "127.0.0.3:0";  // silo.pem names 127.0.0.1
            },
            "does not name the host '127.0.0.3' of --silo"},
           {[](auto& o) {
              o = WithClusterTls(o);
              o.silo_advertise = "127.0.0.2:5000";
            },
            "of --silo_advertise"},
           {[](auto& o) {
              o = WithClusterTls(o);
              o.silo = "0.0.0.0:0";
            },
            "--silo_advertise"},
           {[&c](auto& o) { o.tls_cert = c.a("gateway.pem"); }, "key"},
           {[&c](auto& o) { o.tls_client_ca = c.a("ca.pem"); }, "need TLS"},
           {[&c](auto& o) { o.auth_tokens = c.a("ca.pem"); },
            "expected NAME TOKEN"},
           {[&c](auto& o) {
              o = WithGatewayTls(o);
              o.tls_reload = absl::Milliseconds(10);
            },
            "at least 1s"},
       }) {
    silo::SiloHostOptions o = AnyPorts();
    k.set(o);
    EXPECT_THAT(silo::ValidateSiloHostOptions(o),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(k.why)));
  }
  // Told so, plaintext and anonymous off loopback starts (and is logged as
  // a warning).
  silo::SiloHostOptions o = AnyPorts();
  o.gateway = "0.0.0.0:0";
  o.allow_plaintext = true;
  o.allow_anonymous = true;
  EXPECT_THAT(silo::ValidateSiloHostOptions(o), IsOk());
  // TLS with client authentication needs no such permission.
  o = WithClusterTls(WithGatewayTls(AnyPorts()));
  o.auth_tokens = c.a("tokens");
  o.gateway = "0.0.0.0:0";
  o.silo = "0.0.0.0:0";
  o.silo_advertise = "127.0.0.1:5000";  // the host its certificate names
  EXPECT_THAT(silo::ValidateSiloHostOptions(o), IsOk());
}

TEST(GatewayTlsTest, TlsClientsAreServedAndOthersRefused) {
  std::unique_ptr<Host> h = StartHost(WithGatewayTls(AnyPorts()));
  ASSERT_NE(h, nullptr);
  const std::string gateway = h->host->gateway_address();
  EXPECT_THAT(WhoamiByGrpc(gateway, TrustA()), IsOk());
  const std::string failures_before =
      MetricLine(*h, "granary_tls_handshake_failures_total");
  // Plaintext against TLS.
  EXPECT_THAT(WhoamiByGrpc(gateway, rpc::ClientSecurity()).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  // A client that trusts another CA.
  rpc::ClientSecurity other;
  other.ca_file = Certs::Get().b("ca.pem");
  EXPECT_THAT(WhoamiByGrpc(gateway, other).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  // Both counted (process-wide: as server and as client).
  EXPECT_GE(std::stoi(MetricLine(*h, "granary_tls_handshake_failures_total")),
            std::stoi(failures_before) + 2);
  // The SDK over TLS.
  ClientOptions options;
  options.gateways = {gateway};
  options.security = TrustA();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_THAT(client.status(), IsOk());
  Text text;
  text.set_text("hello");
  EXPECT_EQ((*client)->Get<ProbeRef>("p").Echo(text).Get()->text(), "hello");
}

TEST(GatewayTlsTest, ClientCertificatesAreRequiredAndNameTheCaller) {
  const Certs& c = Certs::Get();
  silo::SiloHostOptions o = WithGatewayTls(AnyPorts());
  o.tls_client_ca = c.a("ca.pem");
  std::unique_ptr<Host> h = StartHost(o);
  ASSERT_NE(h, nullptr);
  const std::string gateway = h->host->gateway_address();
  // No client certificate, one of another CA, an expired one.
  EXPECT_THAT(WhoamiByGrpc(gateway, TrustA()).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(
      WhoamiByGrpc(gateway, ClientCert(c.b("client"), c.a("ca.pem"))).status(),
      StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(
      WhoamiByGrpc(gateway, ClientCert(c.a("expired-client"), c.a("ca.pem")))
          .status(),
      StatusIs(absl::StatusCode::kUnavailable));
  // A silo certificate is of the cluster CA, not the gateway's.
  EXPECT_THAT(
      WhoamiByGrpc(gateway, ClientCert(c.a("silo"), c.a("ca.pem"))).status(),
      StatusIs(absl::StatusCode::kUnavailable));
  absl::StatusOr<std::string> who =
      WhoamiByGrpc(gateway, ClientCert(c.a("client"), c.a("ca.pem")));
  ASSERT_THAT(who.status(), IsOk());
  EXPECT_THAT(*who, HasSubstr("CN=dev-client"));
}

TEST(GatewayTokenTest, TokensAreRequiredComparedAndCounted) {
  const Certs& c = Certs::Get();
  silo::SiloHostOptions o = AnyPorts();  // plaintext on loopback
  o.auth_tokens = c.a("tokens");
  std::unique_ptr<Host> h = StartHost(o);
  ASSERT_NE(h, nullptr);
  const std::string gateway = h->host->gateway_address();
  rpc::ClientSecurity none;
  rpc::ClientSecurity wrong;
  wrong.token = "0000000000000000000000000000000000";
  rpc::ClientSecurity right;
  right.token = FirstToken(c.a("tokens"));
  ASSERT_FALSE(right.token.empty());
  absl::Status missing = WhoamiByGrpc(gateway, none).status();
  absl::Status wrong_status = WhoamiByGrpc(gateway, wrong).status();
  EXPECT_THAT(missing, StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(wrong_status, StatusIs(absl::StatusCode::kUnauthenticated));
  // Neither answer says which it was.
  EXPECT_EQ(missing.message(), wrong_status.message());
  // Counted, by reason.
  EXPECT_EQ(MetricLine(*h,
                       "granary_auth_refused_total{port=\"gateway\","
                       "reason=\"missing_token\"}"),
            "1");
  EXPECT_EQ(MetricLine(*h,
                       "granary_auth_refused_total{port=\"gateway\","
                       "reason=\"wrong_token\"}"),
            "1");
  absl::StatusOr<std::string> who = WhoamiByGrpc(gateway, right);
  ASSERT_THAT(who.status(), IsOk());
  EXPECT_EQ(*who, "dev-client");
  // Through a grain-to-grain call too.
  EXPECT_EQ(*WhoamiByGrpc(gateway, right, "p"), "dev-client");
  // The SDK: the token on its stream; a wrong one is UNAUTHENTICATED.
  {
    ClientOptions options;
    options.gateways = {gateway};
    options.security = right;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
    ASSERT_THAT(client.status(), IsOk());
    Text ask;
    ask.set_text("q");  // p asks q: the identity follows the chain
    EXPECT_EQ((*client)->Get<ProbeRef>("p").Whoami(ask).Get()->text(),
              "dev-client");
  }
  {
    ClientOptions options;
    options.gateways = {gateway};
    options.security = wrong;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
    ASSERT_THAT(client.status(), IsOk());
    absl::StatusOr<Text> reply =
        (*client)->Get<ProbeRef>("p").Whoami(Text()).Get();
    EXPECT_THAT(reply.status(), StatusIs(absl::StatusCode::kUnauthenticated));
  }
  // Health checks need no token.
  EXPECT_THAT(HealthCheck(gateway, none), IsOk());
}

TEST(GatewayTokenTest, TokensAndClientCertificatesTogether) {
  const Certs& c = Certs::Get();
  silo::SiloHostOptions o = WithGatewayTls(AnyPorts());
  o.tls_client_ca = c.a("ca.pem");
  o.auth_tokens = c.a("tokens");
  std::unique_ptr<Host> h = StartHost(o);
  ASSERT_NE(h, nullptr);
  rpc::ClientSecurity s = ClientCert(c.a("client"), c.a("ca.pem"));
  EXPECT_THAT(WhoamiByGrpc(h->host->gateway_address(), s).status(),
              StatusIs(absl::StatusCode::kUnauthenticated));
  s.token = FirstToken(c.a("tokens"));
  // The token's name is the identity.
  EXPECT_EQ(*WhoamiByGrpc(h->host->gateway_address(), s), "dev-client");
}

TEST(HttpTokenTest, EveryPathButHealthzNeedsTheToken) {
  const Certs& c = Certs::Get();
  silo::SiloHostOptions o = AnyPorts();
  o.http_token_file = c.a("token");
  std::unique_ptr<Host> h = StartHost(o);
  ASSERT_NE(h, nullptr);
  const std::string token = ReadAll(c.a("token")).substr(0, 64);
  // The status code of the answer.
  auto get = [&h](const std::string& path, const std::string& headers) {
    const std::string r = HttpGet(h->host->http_address(), path, headers);
    return r.size() > 12 ? r.substr(9, 3) : r;
  };
  EXPECT_EQ(get("/healthz", ""), "200");
  EXPECT_EQ(get("/metrics", ""), "401");
  EXPECT_EQ(get("/metrics", "Authorization: Bearer nope\r\n"), "401");
  EXPECT_EQ(get("/metrics", "Authorization: Bearer " + token + "\r\n"), "200");
  // The dashboard's page is served (static, no data), and it sends the
  // token with the requests that need it.
  const std::string page = HttpGet(h->host->http_address(), "/");
  EXPECT_EQ(page.substr(9, 3), "200");
  EXPECT_NE(page.find("\"Authorization\"] = \"Bearer \""), std::string::npos);
  EXPECT_EQ(get("/api/overview", ""), "401");
  EXPECT_EQ(get("/api/overview", "Authorization: Bearer " + token + "\r\n"),
            "200");
  EXPECT_EQ(MetricLine(*h,
                       "granary_auth_refused_total{port=\"http\","
                       "reason=\"missing_or_wrong_token\"}"),
            "3");
}

// The HTTP token is read again when its file changes, as the gateway's
// tokens are: rotating it needs no restart. A file rewritten empty keeps
// the token in use.
TEST(HttpTokenTest, ARewrittenTokenFileTakesEffectWithoutARestart) {
  const std::string dir = ::testing::TempDir() + "/http_token_reload";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/token";
  auto write = [&](const std::string& text) {
    std::ofstream(path + ".new") << text;
    std::filesystem::rename(path + ".new", path);  // as a secret mount does
  };
  const std::string first = "first-http-token-0123456789abcdef";
  const std::string second = "second-http-token-0123456789abcdef";
  write(first + "\n");
  silo::SiloHostOptions o = AnyPorts();
  o.http_token_file = path;
  o.tls_reload = absl::Seconds(1);
  std::unique_ptr<Host> h = StartHost(o);
  ASSERT_NE(h, nullptr);
  auto status = [&h](const std::string& token) {
    const std::string r = HttpGet(h->host->http_address(), "/metrics",
                                  "Authorization: Bearer " + token + "\r\n");
    return r.size() > 12 ? r.substr(9, 3) : r;
  };
  EXPECT_EQ(status(first), "200");
  EXPECT_EQ(status(second), "401");
  write(second);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (status(second) != "200" && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(status(second), "200");
  EXPECT_EQ(status(first), "401");
  // An empty file is no token: the one in use stays.
  write("");
  absl::SleepFor(absl::Milliseconds(2500));
  EXPECT_EQ(status(second), "200");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace granary::testing
