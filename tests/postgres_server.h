// File: tests/postgres_server.h
// -----------------------------------------------------------------------------
// A throwaway PostgreSQL server for tests: `initdb` in a fresh directory
// under the system's temp directory, listening on 127.0.0.1 at a free port
// (password authentication over TCP), stopped and removed on destruction.
// Run as root, the server runs as the `postgres` system user (PostgreSQL
// refuses root) in a directory that user owns.
//
//   std::unique_ptr<PostgresServer> pg = PostgresServer::Start();
//   ASSERT_NE(pg, nullptr);
//   std::string conninfo = pg->CreateDatabase("t1");
//   ...
//   ASSERT_TRUE(pg->Restart().ok());   // a server restart, same port
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace granary::testing {

class PostgresServer {
 public:
  static constexpr char kPassword[] = "granary-test-secret";

  // nullptr (with a test failure saying why) when the server cannot start.
  static std::unique_ptr<PostgresServer> Start();
  ~PostgresServer();

  int port() const { return port_; }
  // A connection string for `database` as the superuser `postgres`.
  std::string Conninfo(const std::string& database = "postgres") const;
  // Creates `name` and returns its connection string.
  std::string CreateDatabase(const std::string& name);

  // pg_ctl stop (`mode`: smart, fast or immediate) and start again.
  absl::Status Stop(const std::string& mode = "fast");
  absl::Status StartAgain();
  absl::Status Restart() {
    absl::Status s = Stop();
    return s.ok() ? StartAgain() : s;
  }
  // The server's log so far.
  std::string Log() const;

  // Turns TLS on (a restart): the server presents `cert_file` with
  // `key_file` and trusts client certificates of `client_ca_file`;
  // `cert_user` (a role created here, named as the client certificate's
  // CN) may log in with its certificate alone, over TLS only.
  absl::Status EnableTls(const std::string& cert_file,
                         const std::string& key_file,
                         const std::string& client_ca_file,
                         const std::string& cert_user);

 private:
  PostgresServer() = default;
  absl::Status PgCtl(const std::string& args);
  // Copies `from` into the data directory as `name`, owned by the server's
  // user with mode 0600.
  absl::Status Install(const std::string& from, const std::string& name);

  std::string dir_;
  std::string bin_;
  int port_ = 0;
  bool running_ = false;
};

// Connects to `conninfo` and migrates its schema (storage/postgres/schema.h).
absl::Status MigrateSchema(const std::string& conninfo);

// A test suite sharing one server: `server()` in the tests (a test fails
// when it could not start).
class PostgresSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = PostgresServer::Start().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  static PostgresServer* server() { return server_; }

 private:
  inline static PostgresServer* server_ = nullptr;
};

}  // namespace granary::testing
