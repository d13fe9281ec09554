// File: tests/cluster_load.h
// -----------------------------------------------------------------------------
// Load for the cluster process tests: threads that keep calling through the
// given clients until stopped, and record what they saw.
//
//   WhereLoad where(callers, [](size_t c, int i) { return (i * 7 + c) % n; });
//   DepositLoad deposits(callers, /*accounts=*/200);
//   ASSERT_TRUE(deposits.Seed(10).ok());
//   deposits.Start();
//   ... kill, leave or join a silo ...
//   where.Stop(); deposits.Stop();
//   deposits.ExpectBalances(*client);  // no acknowledged deposit lost
//
// Threading: the loads run threads of their own; their readers are
// thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "core/sync.h"
#include "examples/bank.granary.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace granary::testing {

// One thread per caller asks grain pick(c, i) where it lives (AskWhere),
// again and again, recording every answer by grain and every failure.
class WhereLoad {
 public:
  using Pick = std::function<int(size_t caller, int i)>;
  WhereLoad(std::vector<Client*> callers, Pick pick,
            absl::Duration timeout = absl::Seconds(30)) {
    for (size_t c = 0; c < callers.size(); ++c) {
      threads_.emplace_back([this, client = callers[c], c, pick, timeout] {
        for (int i = 0; !stop_.load(); ++i) {
          const int g = pick(c, i);
          absl::StatusOr<Where> w = AskWhere(*client, Key(g), timeout);
          calls_.fetch_add(1);
          MutexLock lock(&mu_);
          if (w.ok()) {
            seen_[g].insert(*w);
          } else {
            errors_.push_back(
                absl::StrCat(Key(g), ": ", w.status().ToString()));
          }
        }
      });
    }
  }
  ~WhereLoad() { Stop(); }

  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int calls() const { return calls_.load(); }
  std::map<int, std::set<Where>> seen() const {
    MutexLock lock(&mu_);
    return seen_;
  }
  std::vector<std::string> errors() const {
    MutexLock lock(&mu_);
    return errors_;
  }
  // Answers so far that came from the silo whose ids start with `prefix`.
  int AnswersFrom(const std::string& prefix) const {
    MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [g, answers] : seen_) {
      for (const Where& w : answers) n += w.rfind(prefix, 0) == 0 ? 1 : 0;
    }
    return n;
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> calls_{0};
  mutable Mutex mu_;
  std::map<int, std::set<Where>> seen_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

// Deposits of 1 into `accounts` BankAccount grains from one thread per
// caller, counting per account the deposits acknowledged and those whose
// outcome is unknown (the call failed: it may or may not have happened).
class DepositLoad {
 public:
  DepositLoad(std::vector<Client*> callers, int accounts)
      : callers_(std::move(callers)), acked_(accounts), unknown_(accounts) {}
  ~DepositLoad() { Stop(); }

  static std::string Account(int a) { return absl::StrCat("acct", a); }

  // Deposits `amount` into every account (acknowledged, or the error).
  absl::Status Seed(int64_t amount) {
    for (size_t a = 0; a < acked_.size(); ++a) {
      absl::Status s =
          Deposit(*callers_[a % callers_.size()], static_cast<int>(a), amount);
      if (!s.ok()) return s;
      acked_[a] += amount;
    }
    return absl::OkStatus();
  }
  void Start() {
    const int n = static_cast<int>(acked_.size());
    for (size_t c = 0; c < callers_.size(); ++c) {
      threads_.emplace_back([this, c, n] {
        for (int i = 0; !stop_.load(); ++i) {
          const int a = (i * 3 + static_cast<int>(c)) % n;
          if (Deposit(*callers_[c], a, 1).ok()) {
            acked_[static_cast<size_t>(a)].fetch_add(1);
          } else {
            unknown_[static_cast<size_t>(a)].fetch_add(1);
          }
        }
      });
    }
  }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  // Every account holds at least what was acknowledged and at most that
  // plus the deposits of unknown outcome. Prints the totals.
  void ExpectBalances(Client& client) {
    int64_t total_acked = 0, total_unknown = 0;
    for (size_t a = 0; a < acked_.size(); ++a) {
      absl::StatusOr<examples::Balance> b =
          client.Get<examples::BankAccountRef>(Account(static_cast<int>(a)))
              .GetBalance(examples::GetBalanceRequest())
              .Get();
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_GE(b->balance(), acked_[a].load()) << Account(static_cast<int>(a));
      EXPECT_LE(b->balance(), acked_[a].load() + unknown_[a].load())
          << Account(static_cast<int>(a));
      total_acked += acked_[a].load();
      total_unknown += unknown_[a].load();
    }
    std::cout << "deposits acknowledged: " << total_acked
              << ", outcome unknown: " << total_unknown << "\n";
  }

 private:
  static absl::Status Deposit(Client& c, int a, int64_t amount) {
    examples::Amount req;
    req.set_amount(amount);
    return c.Get<examples::BankAccountRef>(Account(a))
        .Deposit(req)
        .Get()
        .status();
  }

  const std::vector<Client*> callers_;
  std::vector<std::atomic<int64_t>> acked_, unknown_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace granary::testing
