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
// VictimCallers (with Judge) is the load of the partition tests: it calls a
// set of grains through every client and keeps when each answer was sent
// and received, to tell whether a grain ever answered from two activations
// at once.
//
// Threading: the loads run threads of their own; their readers are
// thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/client.h"
#include "core/sync.h"
#include "examples/bank.granary.h"
#include "gtest/gtest.h"
#include "tests/cluster_fixture.h"

namespace granary::testing {

// Failed calls by status code.
using CodeCounts = std::map<absl::StatusCode, int>;

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
            ++codes_[w.status().code()];
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
  CodeCounts codes() const {
    MutexLock lock(&mu_);
    return codes_;
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
  CodeCounts codes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

// Deposits of 1 into `accounts` BankAccount grains from one thread per
// caller; with `transfer_every` n > 0, every nth operation of a caller is
// instead a transfer of 1 from an account to the next one. Per account it
// keeps the least and the most balance the calls allow: an acknowledged
// call happened, a declined transfer (the balance did not cover it) did
// not, and a failed call may have happened, or part of it (a transfer's
// withdrawal without its deposit, or its deposit without the withdrawal
// when the deposit's reply was lost and the amount was put back).
class DepositLoad {
 public:
  DepositLoad(std::vector<Client*> callers, int accounts,
              int transfer_every = 0)
      : callers_(std::move(callers)),
        transfer_every_(transfer_every),
        least_(accounts),
        most_(accounts) {}
  ~DepositLoad() { Stop(); }

  static std::string Account(int a) { return absl::StrCat("acct", a); }

  // Deposits `amount` into every account (acknowledged, or the error).
  absl::Status Seed(int64_t amount) {
    for (size_t a = 0; a < least_.size(); ++a) {
      absl::Status s =
          Deposit(*callers_[a % callers_.size()], static_cast<int>(a), amount);
      if (!s.ok()) return s;
      least_[a] += amount;
      most_[a] += amount;
    }
    return absl::OkStatus();
  }
  void Start() {
    const int n = static_cast<int>(least_.size());
    for (size_t c = 0; c < callers_.size(); ++c) {
      threads_.emplace_back([this, c, n] {
        for (int i = 0; !stop_.load(); ++i) {
          const int a = (i * 3 + static_cast<int>(c)) % n;
          if (transfer_every_ > 0 &&
              i % transfer_every_ == transfer_every_ - 1) {
            Transfer(*callers_[c], a, (a + 1) % n);
          } else {
            absl::Status s = Deposit(*callers_[c], a, 1);
            if (s.ok()) {
              Add(a, 1, 1);
              deposits_.fetch_add(1);
            } else {
              Add(a, 0, 1);
              Failed(s);
            }
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

  // Acknowledged deposits and transfers so far.
  int64_t acknowledged() const { return deposits_.load() + transfers_.load(); }
  // Calls of unknown outcome (they failed), by code.
  int64_t failed() const {
    MutexLock lock(&mu_);
    int64_t n = 0;
    for (const auto& [code, count] : codes_) n += count;
    return n;
  }
  CodeCounts codes() const {
    MutexLock lock(&mu_);
    return codes_;
  }

  // Every account holds at least what the acknowledged calls put there and
  // at most what the calls of unknown outcome may have added (so with no
  // failed call, exactly what they put there; and the total, which the
  // transfers do not change, is exactly the deposits). Prints the totals.
  void ExpectBalances(Client& client) {
    int64_t total = 0, least = 0, most = 0;
    for (size_t a = 0; a < least_.size(); ++a) {
      absl::StatusOr<examples::Balance> b =
          client.Get<examples::BankAccountRef>(Account(static_cast<int>(a)))
              .GetBalance(examples::GetBalanceRequest())
              .Get();
      ASSERT_TRUE(b.ok()) << Account(static_cast<int>(a)) << ": " << b.status();
      EXPECT_GE(b->balance(), least_[a].load()) << Account(static_cast<int>(a));
      EXPECT_LE(b->balance(), most_[a].load()) << Account(static_cast<int>(a));
      total += b->balance();
      least += least_[a].load();
      most += most_[a].load();
    }
    std::cout << "deposits acknowledged: " << deposits_.load()
              << ", transfers acknowledged: " << transfers_.load()
              << ", declined: " << declined_.load()
              << ", calls of unknown outcome: " << failed()
              << "; total balance " << total << " (allowed " << least << " to "
              << most << ")\n";
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
  void Transfer(Client& c, int from, int to) {
    examples::TransferRequest req;
    req.set_to(Account(to));
    req.set_amount(1);
    absl::Status s = c.Get<examples::BankAccountRef>(Account(from))
                         .Transfer(req)
                         .Get()
                         .status();
    if (s.ok()) {
      Add(from, -1, -1);
      Add(to, 1, 1);
      transfers_.fetch_add(1);
    } else if (s.code() == absl::StatusCode::kFailedPrecondition &&
               absl::StrContains(s.message(), "does not cover")) {
      declined_.fetch_add(1);  // refused before anything was written
    } else {
      Add(from, -1, 0);
      Add(to, 0, 1);
      Failed(s);
    }
  }
  void Add(int a, int64_t least, int64_t most) {
    least_[static_cast<size_t>(a)].fetch_add(least);
    most_[static_cast<size_t>(a)].fetch_add(most);
  }
  void Failed(const absl::Status& s) {
    MutexLock lock(&mu_);
    ++codes_[s.code()];
  }

  const std::vector<Client*> callers_;
  const int transfer_every_;
  std::vector<std::atomic<int64_t>> least_, most_;
  std::atomic<int64_t> deposits_{0}, transfers_{0}, declined_{0};
  mutable Mutex mu_;
  CodeCounts codes_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// One answer of a victim grain: when its call was sent and answered, and
// where from.
struct Answer {
  absl::Time sent;
  absl::Time received;
  Where where;
};

// Calls the victim grains through every client until stopped (two threads
// per client), recording every answer.
class VictimCallers {
 public:
  VictimCallers(std::vector<std::unique_ptr<Client>>& clients,
                const std::vector<int>& victims) {
    for (size_t c = 0; c < clients.size(); ++c) {
      for (size_t t = 0; t < 2; ++t) {
        threads_.emplace_back([this, &clients, &victims, c, t] {
          while (!stop_.load()) {
            for (size_t i = t; i < victims.size() && !stop_.load(); i += 2) {
              const absl::Time sent = absl::Now();
              absl::StatusOr<Where> w =
                  AskWhere(*clients[c], Key(victims[i]), absl::Seconds(3));
              if (!w.ok()) {
                // A backoff, not a wait: once the victim (its client's only
                // gateway) is gone, the others need the CPU to recover.
                absl::SleepFor(absl::Milliseconds(20));
                continue;
              }
              Record(victims[i], Answer{sent, absl::Now(), *w});
            }
          }
        });
      }
    }
  }
  ~VictimCallers() { Stop(); }
  void Record(int g, Answer a) {
    MutexLock lock(&mu_);
    answers_[g].push_back(std::move(a));
    ++count_;
  }
  int64_t count() {
    MutexLock lock(&mu_);
    return count_;
  }
  void Stop() {
    stop_.store(true);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  std::map<int, std::vector<Answer>> answers() {
    MutexLock lock(&mu_);
    return answers_;
  }

 private:
  Mutex mu_;
  std::map<int, std::vector<Answer>> answers_ ABSL_GUARDED_BY(mu_);
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Until every victim answers from a silo other than the one whose ids
// start with `victim_prefix`, asked through `others` (each answer
// recorded); `last` says what the last one that did not answered.
inline bool VictimsMoved(VictimCallers& callers,
                         const std::vector<int>& victims,
                         const std::vector<Client*>& others,
                         const std::string& victim_prefix, std::string* last) {
  return Eventually(
      [&] {
        for (int g : victims) {
          const absl::Time sent = absl::Now();
          absl::StatusOr<Where> w =
              AskWhere(*others[static_cast<size_t>(g) % others.size()], Key(g),
                       absl::Seconds(2));
          if (w.ok()) callers.Record(g, Answer{sent, absl::Now(), *w});
          if (!w.ok() || w->rfind(victim_prefix, 0) == 0) {
            *last = w.ok() ? *w : w.status().ToString();
            return false;
          }
        }
        return true;
      },
      absl::Seconds(60));
}

// What the answers of the victim grains show.
struct Verdict {
  int split = 0;  // grains with more than one new activation
  int stale = 0;  // old answers to calls sent after a new one answered
  size_t old_answers = 0, new_answers = 0;
};

inline Verdict Judge(const std::map<int, std::vector<Answer>>& answers,
                     const std::vector<int>& victims,
                     const std::string& victim_prefix) {
  Verdict v;
  for (int g : victims) {
    auto it = answers.find(g);
    if (it == answers.end()) continue;
    absl::Time first_new = absl::InfiniteFuture();
    std::set<Where> homes;
    for (const Answer& a : it->second) {
      if (a.where.rfind(victim_prefix, 0) == 0) continue;
      first_new = std::min(first_new, a.received);
      homes.insert(a.where);
      ++v.new_answers;
    }
    if (homes.size() > 1) ++v.split;
    for (const Answer& a : it->second) {
      if (a.where.rfind(victim_prefix, 0) != 0) continue;
      ++v.old_answers;
      if (a.sent >= first_new) ++v.stale;
    }
  }
  return v;
}

// The codes of failed calls, "UNAVAILABLE x2, ..." ("none").
inline std::string CodesString(const CodeCounts& codes) {
  std::vector<std::string> parts;
  for (const auto& [code, n] : codes) {
    parts.push_back(absl::StrCat(absl::StatusCodeToString(code), " x", n));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

// Prints what the loads did; fails on any failed call (the first ten
// listed, each followed by `context`).
inline void ExpectNoFailedCall(WhereLoad& load, DepositLoad& bank, int fresh,
                               const std::string& context) {
  const std::vector<std::string> errors = load.errors();
  std::cout << "calls: " << load.calls() << ", new grains: " << fresh
            << ", failed: " << errors.size()
            << "; bank calls failed: " << CodesString(bank.codes()) << "\n";
  for (size_t i = 0; i < errors.size() && i < 10; ++i) {
    ADD_FAILURE() << errors[i] << context;
  }
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(bank.failed(), 0) << CodesString(bank.codes());
}

}  // namespace granary::testing
