// Connections that age out and certificates that rotate, on a real silo
// (SiloHost in this process, the test grains): at --max_connection_age the
// gateway's GOAWAY hands a client's calls on to a new connection without a
// failed call, a revoked token ends the connections it opened, and the
// gateway's and the client's certificates rotate under load.
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

// A silo whose connections live 1 s (±10 %), with a grace of 30 s.
silo::SiloHostOptions ShortLivedConnections(const std::string& tokens) {
  silo::SiloHostOptions o = AnyPorts();
  o.auth_tokens = tokens;
  o.tls_reload = absl::Seconds(1);  // the tokens file's too
  o.max_connection_age = absl::Seconds(1);
  o.max_connection_age_grace = absl::Seconds(30);
  return o;
}

TEST(ConnectionAgeTest, OldConnectionsHandTheirCallsOnWithoutAFailedCall) {
  const Certs& c = Certs::Get();
  std::unique_ptr<Host> h = StartHost(ShortLivedConnections(c.a("tokens")));
  ASSERT_NE(h, nullptr);
  ClientOptions options;
  options.gateways = {h->host->gateway_address()};
  options.security.token = FirstToken(c.a("tokens"));
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_THAT(client.status(), IsOk());
  // Five connection lifetimes of calls, one after another and a few at
  // once: each connection the gateway tells to go hands its calls on.
  const absl::Time end = absl::Now() + absl::Seconds(5);
  int calls = 0;
  while (absl::Now() < end) {
    std::vector<Task<Text>> batch;
    for (int i = 0; i < 4; ++i) {
      Text t;
      t.set_text("x");
      batch.push_back(
          (*client)->Get<ProbeRef>(absl::StrCat("age-", i)).Echo(t));
    }
    for (auto& call : batch) {
      absl::StatusOr<Text> r = std::move(call).Get();
      ASSERT_THAT(r.status(), IsOk()) << "after " << calls << " calls";
      ++calls;
    }
  }
  EXPECT_GT(calls, 100);
}

TEST(ConnectionAgeTest, ARevokedTokenEndsTheConnectionsItOpened) {
  const Certs& c = Certs::Get();
  const std::string dir = ::testing::TempDir() + "/connection_age";
  std::filesystem::create_directories(dir);
  const std::string tokens = dir + "/tokens";
  const std::string token = FirstToken(c.a("tokens"));
  {
    std::ofstream out(tokens);
    out << "dev-client " << token << "\n";
  }
  std::unique_ptr<Host> h = StartHost(ShortLivedConnections(tokens));
  ASSERT_NE(h, nullptr);
  ClientOptions options;
  options.gateways = {h->host->gateway_address()};
  options.security.token = token;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_THAT(client.status(), IsOk());
  ASSERT_THAT((*client)->Get<ProbeRef>("p").Echo(Text()).Get().status(),
              IsOk());
  // The token is revoked: only another client's stays.
  {
    std::ofstream out(tokens + ".new");
    out << "someone-else " << std::string(32, 'z') << "\n";
  }
  std::filesystem::rename(tokens + ".new", tokens);
  // The open connection is told to go within its age; the next one is
  // refused.
  absl::Status last;
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up) {
    last = (*client)->Get<ProbeRef>("p").Echo(Text()).Get().status();
    if (last.code() == absl::StatusCode::kUnauthenticated) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(last, StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST(RotationTest, CertificatesRotateUnderLoadWithoutAFailedCall) {
  const Certs& c = Certs::Get();
  // A copy of set a that this test re-issues.
  const std::string dir = c.dir() + "/rotate";
  std::filesystem::create_directories(dir);
  for (const char* f :
       {"ca.pem", "ca.key", "cluster-ca.pem", "cluster-ca.key", "gateway.pem",
        "gateway.key", "client.pem", "client.key", "silo.pem", "silo.key",
        "token", "tokens"}) {
    std::filesystem::copy_file(
        c.a(f), dir + "/" + f,
        std::filesystem::copy_options::overwrite_existing);
  }
  // The CA the gateway checks clients against, a file of its own.
  std::filesystem::copy_file(c.a("ca.pem"), dir + "/client-ca.pem",
                             std::filesystem::copy_options::overwrite_existing);
  silo::SiloHostOptions o = AnyPorts();
  o.tls_cert = dir + "/gateway.pem";
  o.tls_key = dir + "/gateway.key";
  o.tls_client_ca = dir + "/client-ca.pem";
  o.tls_reload = absl::Seconds(1);
  // Connections end after 3 s (GOAWAY, then 1 s of grace): the client opens
  // new ones, with whatever certificate its credentials hold by then.
  o.max_connection_age = absl::Seconds(3);
  o.max_connection_age_grace = absl::Seconds(1);
  std::unique_ptr<Host> h = StartHost(o);
  ASSERT_NE(h, nullptr);
  const std::string gateway = h->host->gateway_address();
  ClientOptions options;
  options.gateways = {gateway};
  options.security = ClientCert(dir + "/client", dir + "/ca.pem");
  options.security.reload = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_THAT(client.status(), IsOk());
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::thread load([&] {
    int i = 0;
    while (!stop.load()) {
      Text t;
      t.set_text("x");
      absl::StatusOr<Text> r =
          (*client)->Get<ProbeRef>(absl::StrCat("r", i++ % 50)).Echo(t).Get();
      (r.ok() ? ok : failed).fetch_add(1);
    }
  });
  const std::string old_cert = ReadAll(dir + "/gateway.pem");
  const std::string command =
      absl::StrCat("bash ", GRANARY_SOURCE_DIR, "/scripts/dev-certs.sh ", dir,
                   " > /dev/null");
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::string new_cert = ReadAll(dir + "/gateway.pem");
  ASSERT_NE(old_cert, new_cert);
  // New connections get the new certificate once the gateway reloaded it.
  std::string served;
  for (int i = 0; i < 100 && served != new_cert; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    rpc::ClientSecurity fresh = ClientCert(dir + "/client", dir + "/ca.pem");
    fresh.reload = absl::Seconds(2);  // separate credentials: a new watcher
    grpc::ClientContext context;
    if (!HealthCheck(gateway, fresh, &context).ok()) continue;
    std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
    std::vector<grpc::string_ref> pem =
        auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
    if (!pem.empty()) served.assign(pem.front().data(), pem.front().size());
  }
  EXPECT_EQ(served, new_cert);
  // The open connection kept its handshake: not one call failed.
  stop = true;
  load.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  // The client's own certificate: its credentials watch the files too. The
  // gateway now trusts only another CA (set b's), and the client's files
  // hold a certificate of that CA. A client that still presented the old
  // certificate would be refused (the stale client below is), so once the
  // client's connections from before have aged out, a call of the same
  // client that succeeds shows that it read its files again.
  const auto replace = [](const std::string& from, const std::string& to) {
    std::filesystem::copy_file(
        from, to + ".new", std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(to + ".new", to);  // never half a file
  };
  for (const char* f : {"client.pem", "client.key"}) {
    std::filesystem::copy_file(dir + "/" + f, dir + "/old-" + f);
  }
  replace(c.b("ca.pem"), dir + "/client-ca.pem");
  replace(c.b("client.pem"), dir + "/client.pem");
  replace(c.b("client.key"), dir + "/client.key");
  ClientOptions stale_options = options;
  stale_options.security = ClientCert(dir + "/old-client", dir + "/ca.pem");
  absl::Status stale = absl::OkStatus();
  for (int i = 0; i < 100 && stale.ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    absl::StatusOr<std::unique_ptr<Client>> old_client =
        Client::Connect(stale_options);
    stale =
        old_client.ok()
            ? (*old_client)->Get<ProbeRef>("stale").Echo(Text()).Get().status()
            : old_client.status();
    if (old_client.ok()) (*old_client)->Close();
  }
  EXPECT_FALSE(stale.ok()) << "the gateway never took its new client CA";
  // The client's reload period twice, then the age and grace of the
  // connections it had: every connection from here on is a new one.
  absl::SleepFor(absl::Seconds(2) + absl::Seconds(3) + absl::Seconds(1));
  absl::Status after;
  for (int i = 0; i < 100; ++i) {
    after = (*client)->Get<ProbeRef>("after").Echo(Text()).Get().status();
    if (after.ok()) break;
    absl::SleepFor(absl::Milliseconds(100));  // a reconnect under way
  }
  EXPECT_THAT(after, IsOk())
      << "the client did not present its new certificate";
  (*client)->Close();
}

}  // namespace
}  // namespace granary::testing
