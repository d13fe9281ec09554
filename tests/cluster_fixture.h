// File: tests/cluster_fixture.h
// -----------------------------------------------------------------------------
// The fixture of the cluster tests (cluster_routing_test.cc,
// cluster_failure_test.cc, postgres_cluster_test.cc): three granary-silo
// processes on 127.0.0.1 and a client per gateway, with helpers that ask
// grains where they live. The silos form a dev cluster (silo 0 the
// primary), or, with postgres_ set before SetUp, a production cluster on a
// PostgreSQL database (--cluster=postgres, every silo equal), where a test
// may kill any silo and start others (AddSilo).
// GRANARY_CLUSTER_TEST_SCALE shrinks the grain counts.
//
//   class MyTest : public ClusterRoutingTest {
//     void SetUp() override {
//       postgres_ = Postgres{conninfo, "127.0.0.1:5432", "my-cluster"};
//       ClusterRoutingTest::SetUp();
//     }
//   };
#pragma once

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "core/sync.h"
#include "examples/alarm.granary.h"
#include "examples/bank.granary.h"
#include "examples/bench.granary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fault_proxy.h"
#include "tests/process_util.h"

namespace granary::testing {

using ::testing::HasSubstr;

// GRANARY_CLUSTER_TEST_SCALE shrinks the grain counts (make
// test-tsan-grpc runs these tests against much slower TSan-built silos).
inline double Scale() {
  const char* s = std::getenv("GRANARY_CLUSTER_TEST_SCALE");
  const double v = s != nullptr ? std::atof(s) : 1.0;
  return v > 0 && v <= 1 ? v : 1.0;
}
inline int Scaled(int n) { return std::max(10, static_cast<int>(n * Scale())); }

inline const int kGrains = Scaled(10000);
inline constexpr int kThreadsPerClient = 4;

inline std::vector<std::string> DevArgs(const std::string& dir,
                                        const std::string& primary) {
  std::vector<std::string> args = AnyPorts(dir);
  args.push_back("--cluster=dev");
  args.push_back("--storage=memory");
  if (!primary.empty()) args.push_back("--primary=" + primary);
  return args;
}

// A silo of production cluster `cluster_id` on the PostgreSQL database of
// `conninfo` (grain state and reminders there too). The connection string
// goes in a file in `dir` (--postgres_file), so its password is not on the
// command line.
inline std::vector<std::string> PostgresArgs(const std::string& dir,
                                             const std::string& conninfo,
                                             const std::string& cluster_id) {
  std::vector<std::string> args = AnyPorts(dir);
  const std::string file = dir + "/postgres.conninfo";
  std::ofstream(file) << conninfo << "\n";
  args.push_back("--cluster=postgres");
  args.push_back("--postgres_file=" + file);
  args.push_back("--cluster_id=" + cluster_id);
  return args;
}

// `conninfo` with its server replaced by `address` (HOST:PORT; libpq
// takes the last of a repeated keyword).
inline std::string ConninfoVia(const std::string& conninfo,
                               const std::string& address) {
  const size_t colon = address.rfind(':');
  return absl::StrCat(conninfo, " host=", address.substr(0, colon),
                      " port=", address.substr(colon + 1));
}

// "silo/activation id" of one answer.
using Where = std::string;

inline std::string Key(int g) { return absl::StrCat("g", g); }

inline std::unique_ptr<Client> Connect(const std::string& gateway) {
  ClientOptions options;
  options.gateways = {gateway};
  options.gateway_refresh_period = absl::ZeroDuration();  // this one only
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

inline absl::StatusOr<Where> AskWhere(
    Client& client, const std::string& key,
    absl::Duration timeout = absl::Seconds(30)) {
  CallOptions options;
  options.timeout = timeout;
  absl::StatusOr<bench::WhereReply> r =
      client.Get<bench::BenchGrainRef>(key)
          .Where(bench::WhereRequest(), options)
          .Get();
  if (!r.ok()) return r.status();
  return absl::StrCat(r->silo(), "/", r->activation_id());
}

inline std::string SiloOf(const Where& w) {
  return std::string(w.substr(0, w.find('/')));
}

// `granary db migrate` on `conninfo`: the schema a --cluster=postgres silo
// needs.
inline ToolRun MigrateDatabase(const std::string& conninfo) {
  return RunTool(GRANARY_CLI_BINARY,
                 {"--postgres=" + conninfo, "db", "migrate"});
}

// The membership table as `granary cluster` through `gateway` prints it:
// each silo's status (active, dead, ...) by address (its newest
// generation's); empty when the gateway does not answer.
inline std::map<std::string, std::string> Membership(
    const std::string& gateway) {
  std::map<std::string, std::string> status;
  for (absl::string_view line :
       absl::StrSplit(Cli(gateway, {"cluster"}).out, '\n')) {
    // (Indented lines detail the silo above: its types and labels.)
    if (line.empty() || line.front() == ' ') continue;
    std::vector<absl::string_view> cols =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cols.size() < 3 || cols[0] == "SILO") continue;
    status[std::string(cols[0])] = std::string(cols[2]);
  }
  return status;
}

// Silos with `status` in `granary cluster` through `gateway`.
inline int CountStatus(const std::string& gateway, const std::string& status) {
  int n = 0;
  for (const auto& [silo, s] : Membership(gateway)) n += s == status ? 1 : 0;
  return n;
}

inline absl::StatusOr<examples::AlarmState> GetAlarm(Client& client,
                                                     const std::string& key) {
  return client.Get<examples::AlarmRef>(key)
      .Get(examples::GetAlarmRequest())
      .Get();
}

// Ticks of alarm `name` of grain `key` so far, -1 when the grain does not
// answer.
inline int64_t Ticks(Client& client, const std::string& key,
                     const std::string& name = "beat") {
  absl::StatusOr<examples::AlarmState> s = GetAlarm(client, key);
  if (!s.ok()) return -1;
  for (const examples::AlarmInfo& a : s->alarms()) {
    if (a.name() == name) return a.ticks();
  }
  return 0;
}

// Sets alarm `name` of grain `key`: first tick in 100 ms, then every second.
inline absl::StatusOr<examples::AlarmState> SetAlarm(Client& client,
                                                     const std::string& key,
                                                     const std::string& name) {
  examples::SetAlarmRequest set;
  set.set_name(name);
  set.set_due_ms(100);
  set.set_period_ms(1000);
  return client.Get<examples::AlarmRef>(key).Set(set).Get();
}

class ClusterRoutingTest : public ::testing::Test {
 protected:
  // A production cluster's database (see postgres_).
  struct Postgres {
    std::string conninfo;  // of a database migrated to this build's schema
    std::string server;    // HOST:PORT the server listens on
    std::string cluster_id = "test";
  };

  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      StartSilo();
      if (HasFatalFailure()) return;
    }
    // Every gateway sees three active silos.
    WaitForActive(3);
    for (const std::string& gw : gateways_) clients_.push_back(Connect(gw));
  }

  void TearDown() override {
    for (auto& c : clients_) {
      if (c != nullptr) c->Close();
    }
    for (auto& s : silos_) {
      if (!s->exited()) s->Signal(SIGTERM);
    }
    for (size_t i = 0; i < silos_.size(); ++i) {
      if (silos_[i]->exited()) continue;
      if (silos_[i]->Wait(absl::Seconds(60)) == -1) {
        ADD_FAILURE() << "silo " << i << " (" << silo_addresses_[i]
                      << ") still runs 60 s after SIGTERM";
        silos_[i]->Signal(SIGKILL);
        silos_[i]->Wait();
      }
    }
  }

  // Starts silo number silos_.size() and records its addresses (not its
  // client). With partitionable_, silo 2 is started behind the proxies.
  void StartSilo() {
    const size_t i = silos_.size();
    const bool behind_proxies = partitionable_ && i == 2;
    if (behind_proxies) {
      // Silo 2 reaches the membership table (the primary's, with the state
      // and reminders it serves; or the PostgreSQL server) only through
      // table_proxy_.
      table_proxy_ = std::make_unique<FaultProxy>(
          postgres_ ? postgres_->server : silo_addresses_[0]);
      ASSERT_TRUE(table_proxy_->Start().ok());
    }
    const std::string dir = TempDir(absl::StrCat("route-", i));
    std::vector<std::string> args;
    if (postgres_) {
      args = PostgresArgs(dir,
                          behind_proxies ? ConninfoVia(postgres_->conninfo,
                                                       table_proxy_->address())
                                         : postgres_->conninfo,
                          postgres_->cluster_id);
    } else {
      args = DevArgs(dir, i == 0           ? ""
                          : behind_proxies ? table_proxy_->address()
                                           : silo_addresses_[0]);
    }
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    if (fixed_ports_) {
      // Ports of its own, so that a restart with the same flags listens on
      // the same addresses (as under systemd).
      for (std::string& arg : args) {
        for (const char* flag : {"--gateway=", "--silo=", "--http="}) {
          if (arg == absl::StrCat(flag, "127.0.0.1:0")) {
            const int port = FreeFixedPort();
            ASSERT_NE(port, 0);
            arg = absl::StrCat(flag, "127.0.0.1:", port);
          }
        }
      }
    }
    if (behind_proxies) {
      // The others reach silo 2 only through proxy_.
      const int port = FreePort();
      ASSERT_NE(port, 0);
      proxy_ = std::make_unique<FaultProxy>(absl::StrCat("127.0.0.1:", port));
      ASSERT_TRUE(proxy_->Start().ok());
      args.push_back(absl::StrCat("--silo=127.0.0.1:", port));
      args.push_back("--silo_advertise=" + proxy_->address());
    }
    silo_args_.push_back(args);
    silos_.push_back(std::make_unique<SiloProcess>(std::move(args)));
    const std::string ready = silos_.back()->ReadyLine();
    ASSERT_THAT(ready, HasSubstr("READY")) << silos_.back()->Stderr();
    gateways_.push_back(Field(ready, "gateway"));
    silo_addresses_.push_back(Field(ready, "silo"));
    https_.push_back(Field(ready, "http"));
  }

  // SIGTERM to silo `i`, which must exit 0 (a graceful leave); then starts
  // it again with the same flags (a new generation) and waits until every
  // live gateway sees `active` active silos. Its client stays as it is.
  void Restart(size_t i, int active) {
    silos_[i]->Signal(SIGTERM);
    ASSERT_EQ(silos_[i]->Wait(absl::Seconds(60)), 0) << silos_[i]->Stderr();
    silos_[i] = std::make_unique<SiloProcess>(silo_args_[i]);
    const std::string ready = silos_[i]->ReadyLine();
    ASSERT_THAT(ready, HasSubstr("READY")) << silos_[i]->Stderr();
    if (fixed_ports_) {
      EXPECT_EQ(Field(ready, "gateway"), gateways_[i]);
      EXPECT_EQ(Field(ready, "silo"), silo_addresses_[i]);
    }
    gateways_[i] = Field(ready, "gateway");
    silo_addresses_[i] = Field(ready, "silo");
    https_[i] = Field(ready, "http");
    WaitForActive(active);
  }

  // Starts one more silo, waits until every live gateway sees `active`
  // active silos, and connects a client to its gateway.
  void AddSilo(int active) {
    ASSERT_NO_FATAL_FAILURE(StartSilo());
    WaitForActive(active);
    clients_.push_back(Connect(gateways_.back()));
  }

  // Every gateway with a client (all of them before the clients connect)
  // sees `n` active silos.
  void WaitForActive(int n) {
    for (size_t i = 0; i < gateways_.size(); ++i) {
      if (i < clients_.size() && clients_[i] == nullptr) continue;
      ASSERT_TRUE(Eventually([&] {
        return CountStatus(gateways_[i], "active") == n;
      })) << "gateway "
          << gateways_[i] << " does not see " << n << " active silos:\n"
          << Cli(gateways_[i], {"cluster"}).out;
    }
  }

  // The clients not closed (of the silos that still run).
  std::vector<Client*> LiveClients() const {
    std::vector<Client*> live;
    for (const auto& c : clients_) {
      if (c != nullptr) live.push_back(c.get());
    }
    return live;
  }

  // The grains whose answer in `where` (one client's row of AskAll) starts
  // with `prefix` ("address@": they live on that silo).
  static std::vector<int> GrainsOn(const std::vector<Where>& where,
                                   const std::string& prefix) {
    std::vector<int> grains;
    for (size_t g = 0; g < where.size(); ++g) {
      if (where[g].rfind(prefix, 0) == 0) grains.push_back(static_cast<int>(g));
    }
    return grains;
  }

  // Asks every grain where it lives through every client at once;
  // answers[c][g] is client c's answer for grain g ("" when it failed, and
  // for every grain when client c was closed).
  // kGrains hash-placed grains asked through every gateway at once answer
  // from one activation each, spread over all three silos, and from the
  // same activation when asked again.
  void ExpectEveryGrainOnOneActivation();

  std::vector<std::vector<Where>> AskAll(int grains) {
    std::vector<std::vector<Where>> answers(
        clients_.size(), std::vector<Where>(static_cast<size_t>(grains)));
    std::vector<std::thread> threads;
    for (size_t c = 0; c < clients_.size(); ++c) {
      if (clients_[c] == nullptr) continue;
      for (int t = 0; t < kThreadsPerClient; ++t) {
        threads.emplace_back([&, c, t] {
          for (int g = t; g < grains; g += kThreadsPerClient) {
            absl::StatusOr<Where> w = AskWhere(*clients_[c], Key(g));
            if (w.ok()) {
              answers[c][static_cast<size_t>(g)] = *w;
            } else {
              ADD_FAILURE()
                  << Key(g) << " via " << gateways_[c] << ": " << w.status();
            }
          }
        });
      }
    }
    for (std::thread& t : threads) t.join();
    return answers;
  }

  // Set before SetUp: silo 2 is reached by the others through proxy_, and
  // reaches the membership table through table_proxy_.
  bool partitionable_ = false;
  // Set before SetUp: more flags for every silo.
  std::vector<std::string> extra_args_;
  // Set before SetUp: each silo listens on ports chosen for it, not on
  // port 0, so Restart keeps its addresses.
  bool fixed_ports_ = false;
  // Set before SetUp: the silos form a --cluster=postgres cluster on this
  // database instead of a dev cluster.
  std::optional<Postgres> postgres_;
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<FaultProxy> table_proxy_;
  // Index i of each is silo i, in the order they started (killed ones
  // stay; their client is closed and null).
  std::vector<std::unique_ptr<SiloProcess>> silos_;
  std::vector<std::string> gateways_;
  std::vector<std::string> silo_addresses_;
  std::vector<std::string> https_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<std::vector<std::string>> silo_args_;  // each silo's flags
};

// Calls the silos passed on to another silo so far (all silos).
inline int64_t Forwarded(const std::vector<std::string>& https) {
  int64_t total = 0;
  for (const std::string& http : https) {
    const int64_t n = Metric(http, "granary_calls_forwarded_total");
    if (n < 0) return -1;
    total += n;
  }
  return total;
}

// The answers of AskAll agree: every grain answered every client from one
// activation. Returns the grains each silo hosts.
inline std::map<std::string, int> ExpectOneActivationPerGrain(
    const std::vector<std::vector<Where>>& answers) {
  std::map<std::string, int> per_silo;
  int disagreements = 0;
  for (size_t g = 0; !answers.empty() && g < answers[0].size(); ++g) {
    const Where& first = answers[0][g];
    for (size_t c = 1; c < answers.size(); ++c) {
      if (answers[c][g] != first && ++disagreements <= 5) {
        ADD_FAILURE() << Key(static_cast<int>(g)) << ": " << first << " vs "
                      << answers[c][g];
      }
    }
    ++per_silo[SiloOf(first)];
  }
  EXPECT_EQ(disagreements, 0);
  return per_silo;
}

inline void ClusterRoutingTest::ExpectEveryGrainOnOneActivation() {
  const std::vector<std::vector<Where>> answers = AskAll(kGrains);
  const std::map<std::string, int> per_silo =
      ExpectOneActivationPerGrain(answers);
  // BenchGrain is placed by hash: the grains spread over all three silos,
  // and every gateway sends a new grain to the same one.
  EXPECT_EQ(per_silo.size(), 3u);
  for (const auto& [silo, n] : per_silo) {
    std::cout << silo << " hosts " << n << " grains\n";
    EXPECT_GT(n, kGrains / 10) << silo;
  }
  // Asked again, every grain answers from the same activation.
  for (int g = 0; g < kGrains; g += 97) {
    absl::StatusOr<Where> again = AskWhere(*clients_[g % 3], Key(g));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, answers[0][static_cast<size_t>(g)]);
  }
}

// Asks every grain of `after` that has no answer yet, or one from `victim`
// (a silo id, SiloOf), through `clients` (grain g through client g % n)
// until each answers from a live silo.
inline bool EveryGrainAnswersOffTheVictim(const std::vector<Client*>& clients,
                                          const std::string& victim,
                                          std::vector<Where>* after) {
  return Eventually(
      [&] {
        bool all = true;
        for (size_t g = 0; g < after->size(); ++g) {
          if (!(*after)[g].empty() && SiloOf((*after)[g]) != victim) continue;
          absl::StatusOr<Where> w =
              AskWhere(*clients[g % clients.size()], Key(static_cast<int>(g)),
                       absl::Seconds(2));
          if (!w.ok() || SiloOf(*w) == victim) {
            all = false;
            continue;
          }
          (*after)[g] = *w;
        }
        return all;
      },
      absl::Seconds(90));
}

// The victim's grains moved; every other grain kept its activation; and at
// no time did two live activations answer: after the kill a grain answered
// from its old activation (on the victim, before detection) and at most one
// new one.
inline void ExpectOnlyTheVictimsGrainsMoved(
    const std::vector<Where>& home, const std::vector<Where>& after,
    const std::map<int, std::set<Where>>& seen, const std::string& victim) {
  int moved = 0, kept = 0;
  for (size_t g = 0; g < home.size(); ++g) {
    if (SiloOf(home[g]) == victim) {
      ++moved;
      EXPECT_NE(SiloOf(after[g]), victim);
    } else {
      ++kept;
      EXPECT_EQ(after[g], home[g])
          << Key(static_cast<int>(g)) << " lived on a surviving silo";
    }
    std::set<Where> live = {after[g]};
    if (auto it = seen.find(static_cast<int>(g)); it != seen.end()) {
      for (const Where& w : it->second) {
        if (SiloOf(w) != victim) live.insert(w);
      }
    }
    EXPECT_EQ(live.size(), 1u) << Key(static_cast<int>(g)) << " answered from "
                               << live.size() << " live activations";
  }
  EXPECT_GT(moved, 0);
  EXPECT_GT(kept, 0);
  std::cout << "grains moved: " << moved << ", kept: " << kept << "\n";
}

}  // namespace granary::testing
