// File: tests/cluster_fixture.h
// -----------------------------------------------------------------------------
// The fixture of the cluster tests (cluster_routing_test.cc,
// cluster_failure_test.cc): a dev cluster of three granary-silo processes on
// 127.0.0.1 and a client per gateway, with helpers that ask grains where
// they live. GRANARY_CLUSTER_TEST_SCALE shrinks the grain counts.
#pragma once

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
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

inline absl::StatusOr<Where> AskWhere(Client& client, const std::string& key,
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

class ClusterRoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> primary_args = DevArgs(TempDir("route-primary"), "");
    primary_args.insert(primary_args.end(), extra_args_.begin(),
                        extra_args_.end());
    silos_.push_back(std::make_unique<SiloProcess>(std::move(primary_args)));
    const std::string p = silos_[0]->ReadyLine();
    ASSERT_THAT(p, HasSubstr("READY"));
    gateways_.push_back(Field(p, "gateway"));
    silo_addresses_.push_back(Field(p, "silo"));
    https_.push_back(Field(p, "http"));
    for (int i = 1; i < 3; ++i) {
      std::string primary = Field(p, "silo");
      if (i == 2 && partitionable_) {
        // Silo 2 reaches the primary's table (and the state and reminders
        // it serves) only through table_proxy_.
        table_proxy_ = std::make_unique<FaultProxy>(primary);
        ASSERT_TRUE(table_proxy_->Start().ok());
        primary = table_proxy_->address();
      }
      std::vector<std::string> args =
          DevArgs(TempDir(absl::StrCat("route-", i)), primary);
      args.insert(args.end(), extra_args_.begin(), extra_args_.end());
      if (i == 2 && partitionable_) {
        // The others reach silo 2 only through proxy_.
        const int port = FreePort();
        ASSERT_NE(port, 0);
        proxy_ = std::make_unique<FaultProxy>(absl::StrCat("127.0.0.1:", port));
        ASSERT_TRUE(proxy_->Start().ok());
        args.push_back(absl::StrCat("--silo=127.0.0.1:", port));
        args.push_back("--silo_advertise=" + proxy_->address());
      }
      silos_.push_back(std::make_unique<SiloProcess>(std::move(args)));
      const std::string ready = silos_.back()->ReadyLine();
      ASSERT_THAT(ready, HasSubstr("READY"));
      gateways_.push_back(Field(ready, "gateway"));
      silo_addresses_.push_back(Field(ready, "silo"));
      https_.push_back(Field(ready, "http"));
    }
    // Every gateway sees three active silos.
    for (const std::string& gw : gateways_) {
      ASSERT_TRUE(Eventually([&] {
        const std::string table = Cli(gw, {"cluster"}).out;
        size_t n = 0, at = 0;
        while ((at = table.find(" active ", at)) != std::string::npos) {
          ++n;
          ++at;
        }
        return n == 3;
      }));
    }
    for (const std::string& gw : gateways_) clients_.push_back(Connect(gw));
  }

  void TearDown() override {
    for (auto& c : clients_) {
      if (c != nullptr) c->Close();
    }
    for (auto& s : silos_) s->Signal(SIGTERM);
    for (auto& s : silos_) s->Wait();
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
  // answers[c][g] is client c's answer for grain g ("" when it failed).
  std::vector<std::vector<Where>> AskAll(int grains) {
    std::vector<std::vector<Where>> answers(
        clients_.size(), std::vector<Where>(static_cast<size_t>(grains)));
    std::vector<std::thread> threads;
    for (size_t c = 0; c < clients_.size(); ++c) {
      for (int t = 0; t < kThreadsPerClient; ++t) {
        threads.emplace_back([&, c, t] {
          for (int g = t; g < grains; g += kThreadsPerClient) {
            absl::StatusOr<Where> w = AskWhere(*clients_[c], Key(g));
            if (w.ok()) {
              answers[c][static_cast<size_t>(g)] = *w;
            } else {
              ADD_FAILURE() << Key(g) << " via " << gateways_[c] << ": "
                            << w.status();
            }
          }
        });
      }
    }
    for (std::thread& t : threads) t.join();
    return answers;
  }

  // Set before SetUp: silo 2 is reached by the others through proxy_, and
  // reaches the primary's table through table_proxy_.
  bool partitionable_ = false;
  // Set before SetUp: more flags for every silo.
  std::vector<std::string> extra_args_;
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<FaultProxy> table_proxy_;
  std::vector<std::unique_ptr<SiloProcess>> silos_;
  std::vector<std::string> gateways_;
  std::vector<std::string> silo_addresses_;
  std::vector<std::string> https_;
  std::vector<std::unique_ptr<Client>> clients_;
};

// Calls the silos passed on to another silo so far (all silos).
inline int64_t Forwarded(const std::vector<std::string>& https) {
  int64_t total = 0;
  for (const std::string& http : https) {
    const std::string metrics = HttpGet(http, "/metrics");
    const std::string name = "\ngranary_calls_forwarded_total ";
    const size_t at = metrics.find(name);
    if (at == std::string::npos) return -1;
    total += std::atoll(metrics.c_str() + at + name.size());
  }
  return total;
}

}  // namespace granary::testing
