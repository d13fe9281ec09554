// File: tests/tls_fixture.h
// -----------------------------------------------------------------------------
// What the security tests share: certificates made once per test binary by
// tests/make-test-certs.sh (two independent sets, a and b, and expired
// ones in a), SiloHost options with TLS on the gateway or between silos, a
// host running the test grains, and raw unary calls with given credentials.
//
//   std::unique_ptr<Host> h = StartHost(WithGatewayTls(AnyPorts()));
//   EXPECT_THAT(WhoamiByGrpc(h->host->gateway_address(), TrustA()), IsOk());
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/credentials.h"
#include "silo/silo_host.h"
#include "tests/test_grains.h"
#include "tests/test_grains.pb.h"

namespace granary::testing {

// Certificates of tests/make-test-certs.sh: DIR/a and DIR/b are two
// independent sets (b's are "from another CA"); DIR/a has expired ones.
class Certs {
 public:
  static const Certs& Get() {
    static const Certs* certs = new Certs();
    return *certs;
  }
  std::string a(const std::string& file) const { return dir_ + "/a/" + file; }
  std::string b(const std::string& file) const { return dir_ + "/b/" + file; }
  const std::string& dir() const { return dir_; }

 private:
  Certs() {
    // In the test's temporary directory (TMPDIR, removed after the test).
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "granary-certs-XXXXXX")
            .string();
    dir_ = mkdtemp(tmpl.data());
    const std::string command = absl::StrCat(
        "bash ", GRANARY_SOURCE_DIR, "/tests/make-test-certs.sh ", dir_);
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
  }
  std::string dir_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::string FirstToken(const std::string& tokens_file) {
  std::istringstream in(ReadAll(tokens_file));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, token;
    fields >> name >> token;
    return token;
  }
  return "";
}

inline silo::SiloHostOptions AnyPorts() {
  silo::SiloHostOptions o;
  o.gateway = "127.0.0.1:0";
  o.silo = "127.0.0.1:0";
  o.http = "127.0.0.1:0";
  o.storage = "memory";
  o.workers = 2;
  return o;
}

inline silo::SiloHostOptions WithGatewayTls(silo::SiloHostOptions o) {
  const Certs& c = Certs::Get();
  o.tls_cert = c.a("gateway.pem");
  o.tls_key = c.a("gateway.key");
  return o;
}

inline silo::SiloHostOptions WithClusterTls(silo::SiloHostOptions o) {
  const Certs& c = Certs::Get();
  o.cluster_ca = c.a("cluster-ca.pem");
  o.cluster_tls_cert = c.a("silo.pem");
  o.cluster_tls_key = c.a("silo.key");
  return o;
}

struct Host {
  TestState state;
  std::unique_ptr<silo::SiloHost> host;
};

inline std::unique_ptr<Host> StartHost(silo::SiloHostOptions options) {
  auto h = std::make_unique<Host>();
  h->host = std::make_unique<silo::SiloHost>(std::move(options));
  TestState* state = &h->state;
  h->host->AddGrains(
      [state](silo::Runtime& silo) { return AddTestGrains(silo, state); });
  absl::Status started = h->host->Start();
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return nullptr;
  return h;
}

// The value of the sample `series` (name and labels) of the host's
// metrics, or "" when it has none.
inline std::string MetricLine(Host& h, const std::string& series) {
  std::istringstream in(h.host->silo()->metrics_registry().Render());
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  }
  return "";
}

// A unary call of `method` with raw bytes, on a channel of its own (so a
// fresh handshake) with what `security` presents; `context` (optional)
// is the call's, for its auth context after the call.
inline absl::StatusOr<std::string> UnaryBytes(
    const std::string& address, const rpc::ClientSecurity& security,
    const std::string& method, const std::string& request,
    const std::vector<std::pair<std::string, std::string>>& metadata = {},
    grpc::ClientContext* context = nullptr) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      address, rpc::MakeChannelCredentials(security), args);
  grpc::GenericStub stub(channel);
  grpc::ClientContext own;
  if (context == nullptr) context = &own;
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  for (const auto& [k, v] : metadata) context->AddMetadata(k, v);
  rpc::AddCallToken(context, security);
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1);
  grpc::ByteBuffer out;
  std::promise<grpc::Status> done;
  stub.UnaryCall(context, method, grpc::StubOptions(), &in, &out,
                 [&done](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  std::vector<grpc::Slice> slices;
  (void)out.Dump(&slices);
  std::string reply;
  for (const grpc::Slice& s : slices) {
    reply.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return reply;
}

// A standard gRPC call of Probe/Whoami through the gateway's per-grain
// service: the identity grain code sees.
inline absl::StatusOr<std::string> WhoamiByGrpc(
    const std::string& gateway, const rpc::ClientSecurity& security,
    const std::string& key = "p") {
  absl::StatusOr<std::string> bytes =
      UnaryBytes(gateway, security, "/granary.testing.Probe/Whoami",
                 Text().SerializeAsString(), {{"granary-key", key}});
  if (!bytes.ok()) return bytes.status();
  Text reply;
  if (!reply.ParseFromString(*bytes)) {
    return absl::InternalError("reply does not parse");
  }
  return reply.text();
}

// The standard health check (which needs no token).
inline absl::Status HealthCheck(const std::string& address,
                                const rpc::ClientSecurity& security,
                                grpc::ClientContext* context = nullptr) {
  return UnaryBytes(address, security, "/grpc.health.v1.Health/Check", "", {},
                    context)
      .status();
}

inline rpc::ClientSecurity TrustA() {
  rpc::ClientSecurity s;
  s.ca_file = Certs::Get().a("ca.pem");
  return s;
}

inline rpc::ClientSecurity ClientCert(const std::string& dir_file_prefix,
                                      const std::string& ca) {
  rpc::ClientSecurity s;
  s.ca_file = ca;
  s.cert_file = dir_file_prefix + ".pem";
  s.key_file = dir_file_prefix + ".key";
  return s;
}

}  // namespace granary::testing
