// File: tests/postgres_cluster_fixture.h
// -----------------------------------------------------------------------------
// The fixture of postgres_cluster_test.cc: three granary-silo processes of
// one --cluster=postgres cluster (tests/cluster_fixture.h) on a database of
// their own, migrated with `granary db migrate`; one PostgreSQL server per
// suite.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/cluster_fixture.h"
#include "tests/postgres_server.h"

namespace granary::testing {

// Three silos of cluster "test" on a database of their own, one
// PostgreSQL server per suite.
class PostgresClusterTest : public ClusterRoutingTest {
 protected:
  static void SetUpTestSuite() { server_ = PostgresServer::Start().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    const std::string conninfo =
        server_->CreateDatabase(absl::StrCat("cluster_", ++databases_));
    const ToolRun migrate = MigrateDatabase(conninfo);
    ASSERT_EQ(migrate.exit_code, 0) << migrate.err;
    postgres_ =
        Postgres{conninfo, absl::StrCat("127.0.0.1:", server_->port()), "test"};
    ClusterRoutingTest::SetUp();
  }

  void TearDown() override {
    ClusterRoutingTest::TearDown();
    if (!HasFailure()) return;
    // What the silos said (warnings and errors), for the failure's cause.
    for (size_t i = 0; i < silos_.size(); ++i) {
      const std::string err = silos_[i]->Stderr();
      std::cout << "---- silo " << i << " (" << silo_addresses_[i]
                << ") stderr, last 6000 bytes:\n"
                << err.substr(err.size() > 6000 ? err.size() - 6000 : 0)
                << "\n";
    }
  }

  static PostgresServer* server() { return server_; }

  // A client of every live gateway that also learns the gateways of silos
  // that join later.
  std::unique_ptr<Client> ConnectAll() {
    ClientOptions options;
    for (size_t i = 0; i < gateways_.size(); ++i) {
      if (clients_[i] != nullptr) options.gateways.push_back(gateways_[i]);
    }
    options.gateway_refresh_period = absl::Milliseconds(200);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return nullptr;
    EXPECT_TRUE((*c)->WaitForConnected(absl::Seconds(10)).ok());
    return *std::move(c);
  }

  // The answers of the first client that still runs, in a result of AskAll.
  std::vector<Where> LiveRow(const std::vector<std::vector<Where>>& answers) {
    for (size_t c = 0; c < clients_.size(); ++c) {
      if (clients_[c] != nullptr) return answers[c];
    }
    return {};
  }

  // SIGKILL to silo `i`; its client is closed first.
  void Kill(size_t i) {
    clients_[i]->Close();
    clients_[i] = nullptr;
    silos_[i]->Signal(SIGKILL);
    EXPECT_EQ(silos_[i]->Wait(), 128 + SIGKILL);
  }

  // The status of silo `i` in the table, as the first live gateway shows it.
  std::string StatusOf(size_t i) {
    for (size_t c = 0; c < clients_.size(); ++c) {
      if (c != i && clients_[c] != nullptr) {
        return Membership(gateways_[c])[silo_addresses_[i]];
      }
    }
    return "";
  }

  // Reminders the live silos schedule, over all of them.
  int64_t ScheduledReminders() {
    int64_t total = 0;
    for (size_t i = 0; i < silos_.size(); ++i) {
      if (clients_[i] == nullptr) continue;
      const int64_t n = Metric(https_[i], "granary_reminders");
      if (n < 0) return -1;
      total += n;
    }
    return total;
  }

  // Every account of a DepositLoad with `accounts` answers through
  // `client`.
  static bool AccountsAnswer(Client& client, int accounts) {
    return Eventually(
        [&] {
          for (int a = 0; a < accounts; ++a) {
            CallOptions options;
            options.timeout = absl::Seconds(5);
            if (!client.Get<examples::BankAccountRef>(DepositLoad::Account(a))
                     .GetBalance(examples::GetBalanceRequest(), options)
                     .Get()
                     .ok()) {
              return false;
            }
          }
          return true;
        },
        absl::Seconds(90));
  }

 private:
  inline static PostgresServer* server_ = nullptr;
  inline static int databases_ = 0;
};

}  // namespace granary::testing
