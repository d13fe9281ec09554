// PostgreSQL over TLS: the CONNINFO reaches libpq unchanged, so
// `sslmode=verify-full` checks the server's certificate and name, a client
// certificate logs in a role by certificate, and a silo of a
// --cluster=postgres cluster runs on such a connection string. The server
// is a throwaway one with TLS on (tests/postgres_server.h), its
// certificates those of tests/make-test-certs.sh.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "core/testing/status_matchers.h"
#include "examples/bank.granary.h"
#include "examples/counter_grain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/schema.h"
#include "tests/postgres_server.h"
#include "tests/tls_fixture.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;

class PostgresTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const Certs& c = Certs::Get();
    server_ = PostgresServer::Start().release();
    if (server_ == nullptr) return;
    absl::Status tls = server_->EnableTls(
        c.a("gateway.pem"), c.a("gateway.key"), c.a("ca.pem"), "dev-client");
    if (!tls.ok()) {
      ADD_FAILURE() << tls << "\n" << server_->Log();
      delete server_;
      server_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  // The password login of the server, with `tls` appended.
  static std::string WithTls(const std::string& tls) {
    return absl::StrCat(server_->Conninfo(), " ", tls);
  }

  // Whether the session runs over TLS (pg_stat_ssl).
  static bool Encrypted(storage::PgConnection& db) {
    absl::StatusOr<storage::PgResult> r = db.Exec(
        "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
    return r.ok() && r->rows() == 1 && r->Text(0, 0) == "true";
  }

  inline static PostgresServer* server_ = nullptr;
};

TEST_F(PostgresTlsTest, VerifyFullChecksTheServerCertificate) {
  const Certs& c = Certs::Get();
  absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
      storage::PgConnection::Connect(
          WithTls(
              absl::StrCat("sslmode=verify-full sslrootcert=", c.a("ca.pem"))),
          absl::Seconds(10));
  ASSERT_THAT(db.status(), IsOk());
  EXPECT_TRUE(Encrypted(**db));
  // A server whose certificate is of a CA the client does not trust.
  absl::StatusOr<std::unique_ptr<storage::PgConnection>> other =
      storage::PgConnection::Connect(
          WithTls(
              absl::StrCat("sslmode=verify-full sslrootcert=", c.b("ca.pem"))),
          absl::Seconds(10));
  EXPECT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()),
              Not(HasSubstr(PostgresServer::kPassword)));
  // The name checked: the certificate does not name 127.0.0.2.
  absl::StatusOr<std::unique_ptr<storage::PgConnection>> renamed =
      storage::PgConnection::Connect(
          absl::StrCat("host=127.0.0.2 port=", server_->port(),
                       " dbname=postgres user=postgres password=",
                       PostgresServer::kPassword,
                       " sslmode=verify-full sslrootcert=", c.a("ca.pem")),
          absl::Seconds(10));
  EXPECT_FALSE(renamed.ok());
}

TEST_F(PostgresTlsTest, AClientCertificateLogsInItsRole) {
  const Certs& c = Certs::Get();
  const std::string base =
      absl::StrCat("host=127.0.0.1 port=", server_->port(),
                   " dbname=postgres user=dev-client connect_timeout=10 "
                   "sslmode=verify-full sslrootcert=",
                   c.a("ca.pem"));
  absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
      storage::PgConnection::Connect(
          absl::StrCat(base, " sslcert=", c.a("client.pem"),
                       " sslkey=", c.a("client.key")),
          absl::Seconds(10));
  ASSERT_THAT(db.status(), IsOk());
  EXPECT_TRUE(Encrypted(**db));
  // Without it (and without a password) the role cannot log in; nor with a
  // certificate of another CA.
  EXPECT_FALSE(storage::PgConnection::Connect(base, absl::Seconds(10)).ok());
  EXPECT_FALSE(storage::PgConnection::Connect(
                   absl::StrCat(base, " sslcert=", c.b("client.pem"),
                                " sslkey=", c.b("client.key")),
                   absl::Seconds(10))
                   .ok());
}

TEST_F(PostgresTlsTest, ASiloRunsOnAVerifiedTlsConnection) {
  const Certs& c = Certs::Get();
  const std::string conninfo =
      absl::StrCat(server_->CreateDatabase("tls"),
                   " sslmode=verify-full sslrootcert=", c.a("ca.pem"));
  ASSERT_THAT(MigrateSchema(conninfo), IsOk());
  silo::SiloHostOptions o = AnyPorts();
  o.cluster = "postgres";
  o.storage = "";
  o.postgres = conninfo;
  silo::SiloHost host(o);
  host.AddGrains(examples::AddExampleGrains);
  ASSERT_THAT(host.Start(), IsOk());
  ClientOptions options;
  options.gateways = {host.gateway_address()};
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_THAT(client.status(), IsOk());
  examples::Amount five;
  five.set_amount(5);
  EXPECT_THAT((*client)->Get<examples::BankAccountRef>("a").Deposit(five).Get(),
              IsOk());
  (*client)->Close();
  host.Stop();
}

}  // namespace
}  // namespace granary::testing
