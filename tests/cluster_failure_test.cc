// Failures in a dev cluster of three granary-silo processes: a silo cut off
// by a partition is declared dead and no grain ever answers from two
// activations; reminders are kept by the primary and tick wherever their
// grain lives, also after that grain's silo died.
#include <signal.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/cluster_fixture.h"

namespace granary::testing {
namespace {

enum class Partition {
  // The others cannot reach silo 2; it reaches them, and the primary's table
  // over a slow link (its reads arrive 400 ms late each way), so it learns
  // of its death after them.
  kSlowTable,
  // Nobody reaches silo 2 and it cannot reach the table (so its lease
  // lapses), until its grains came back elsewhere; then its link to the
  // table heals. (Its own connections to the other silos are not cut.)
  kIsolated,
};

class ClusterPartitionTest : public ClusterRoutingTest,
                             public ::testing::WithParamInterface<Partition> {
 protected:
  void SetUp() override {
    partitionable_ = true;
    ClusterRoutingTest::SetUp();
  }
};

// Partition through a fault-injecting transport: the other silos reach
// silo 2 only through a TCP proxy (it advertises the proxy's address), and
// the proxy becomes a black hole. Its clients still reach its gateway, so
// its grains may answer there as long as it runs grain code. The others
// declare it dead, it learns that from the table and exits 3, its grains
// come back on the others, and no grain answers from two activations at any
// time: no call sent after a grain's new activation answered is answered by
// the old one. kSlowTable needs the owners' dead-silo grace; kIsolated
// needs the membership lease.
TEST_P(ClusterPartitionTest, ACutOffSiloIsDeclaredDeadAndNoGrainAnswersFromTwoActivations) {
  const int kCutGrains = Scaled(1500);
  const std::vector<std::vector<Where>> before = AskAll(kCutGrains);
  const std::string victim_prefix = silo_addresses_[2] + "@";
  const std::vector<int> victims = GrainsOn(before[0], victim_prefix);
  ASSERT_FALSE(victims.empty());

  struct Answer {
    absl::Time sent;
    absl::Time received;
    Where where;
  };
  Mutex mu;
  std::map<int, std::vector<Answer>> answers;
  std::atomic<bool> stop{false};
  std::vector<std::thread> callers;
  for (size_t c = 0; c < clients_.size(); ++c) {
    for (size_t t = 0; t < 2; ++t) {
      callers.emplace_back([&, c, t] {
        while (!stop.load()) {
          for (size_t i = t; i < victims.size() && !stop.load(); i += 2) {
            const absl::Time sent = absl::Now();
            absl::StatusOr<Where> w =
                AskWhere(*clients_[c], Key(victims[i]), absl::Seconds(3));
            if (!w.ok()) {
              // Not a busy loop once silo 2 (client 2's only gateway) is
              // gone: the others need the CPU to recover.
              absl::SleepFor(absl::Milliseconds(20));
              continue;
            }
            MutexLock lock(&mu);
            answers[victims[i]].push_back(Answer{sent, absl::Now(), *w});
          }
        }
      });
    }
  }
  absl::SleepFor(absl::Milliseconds(500));
  proxy_->Cut();
  if (GetParam() == Partition::kSlowTable) {
    table_proxy_->SetDelay(absl::Milliseconds(400));
  } else {
    table_proxy_->Cut();
  }
  const absl::Time cut_at = absl::Now();
  absl::Duration exited_after;
  if (GetParam() == Partition::kSlowTable) {
    EXPECT_EQ(silos_[2]->Wait(absl::Seconds(60)), 3)
        << "a silo declared dead exits with 3";
    exited_after = absl::Now() - cut_at;
  }
  // Its grains answer from the others.
  std::string last;
  EXPECT_TRUE(Eventually(
      [&] {
        for (int g : victims) {
          const absl::Time sent = absl::Now();
          absl::StatusOr<Where> w =
              AskWhere(*clients_[g % 2], Key(g), absl::Seconds(2));
          if (w.ok()) {
            MutexLock lock(&mu);
            answers[g].push_back(Answer{sent, absl::Now(), *w});
          }
          if (!w.ok() || w->rfind(victim_prefix, 0) == 0) {
            last = w.ok() ? *w : w.status().ToString();
            return false;
          }
        }
        return true;
      },
      absl::Seconds(60)))
      << last;
  const absl::Duration recovered_after = absl::Now() - cut_at;
  if (GetParam() == Partition::kIsolated) {
    // It reads the table again: it must exit, without answering from an
    // old activation meanwhile.
    table_proxy_->Heal();
    EXPECT_EQ(silos_[2]->Wait(absl::Seconds(60)), 3)
        << "a silo declared dead exits with 3";
    exited_after = absl::Now() - cut_at;
  }
  absl::SleepFor(absl::Milliseconds(500));  // callers keep calling a while
  stop.store(true);
  for (std::thread& t : callers) t.join();

  MutexLock lock(&mu);
  size_t old_answers = 0, new_answers = 0;
  for (int g : victims) {
    const std::vector<Answer>& seen = answers[g];
    absl::Time first_new = absl::InfiniteFuture();
    std::set<Where> homes;
    for (const Answer& a : seen) {
      if (a.where.rfind(victim_prefix, 0) != 0) {
        first_new = std::min(first_new, a.received);
        homes.insert(a.where);
        ++new_answers;
      }
    }
    // (Every victim answered from the others at the end: see above.)
    EXPECT_EQ(homes.size(), 1u) << Key(g) << " has " << homes.size()
                                << " new activations";
    for (const Answer& a : seen) {
      if (a.where.rfind(victim_prefix, 0) != 0) continue;
      ++old_answers;
      EXPECT_LT(a.sent, first_new)
          << Key(g) << ": its old activation (" << a.where
          << ") answered a call sent after the new one had answered";
    }
  }
  std::cout << "victim grains: " << victims.size()
            << "; exited " << absl::FormatDuration(exited_after)
            << " after the cut; all answering from the others after "
            << absl::FormatDuration(recovered_after) << "; answers from the "
            << "old activations " << old_answers << ", from new ones "
            << new_answers << "; bytes dropped by the cut " << proxy_->dropped()
            << "\n";
}

INSTANTIATE_TEST_SUITE_P(Partitions, ClusterPartitionTest,
                         ::testing::Values(Partition::kSlowTable,
                                           Partition::kIsolated),
                         [](const ::testing::TestParamInfo<Partition>& p) {
                           return p.param == Partition::kSlowTable
                                      ? std::string("SlowTable")
                                      : std::string("Isolated");
                         });


absl::StatusOr<examples::AlarmState> GetAlarm(Client& client,
                                              const std::string& key) {
  return client.Get<examples::AlarmRef>(key)
      .Get(examples::GetAlarmRequest())
      .Get();
}

// Ticks of alarm `name` so far, -1 when the grain does not answer.
int64_t Ticks(Client& client, const std::string& key) {
  absl::StatusOr<examples::AlarmState> s = GetAlarm(client, key);
  if (!s.ok()) return -1;
  for (const examples::AlarmInfo& a : s->alarms()) {
    if (a.name() == "beat") return a.ticks();
  }
  return 0;
}

TEST_F(ClusterRoutingTest, RemindersTickWhereverTheirGrainLivesAndOutliveItsSilo) {
  constexpr int kAlarms = 12;
  auto key = [](int a) { return absl::StrCat("alarm", a); };
  // Registered through a gateway other than the primary's; the grains live
  // all over the cluster, the reminders with the primary.
  Client& client = *clients_[1];
  std::set<std::string> homes;
  for (int a = 0; a < kAlarms; ++a) {
    examples::SetAlarmRequest set;
    set.set_name("beat");
    set.set_due_ms(100);
    set.set_period_ms(1000);
    absl::StatusOr<examples::AlarmState> s =
        client.Get<examples::AlarmRef>(key(a)).Set(set).Get();
    ASSERT_TRUE(s.ok()) << s.status();
    homes.insert(s->silo());
    // The reminder is listed wherever the grain lives (asked of the primary).
    ASSERT_EQ(s->alarms_size(), 1);
    EXPECT_EQ(s->alarms(0).period_ms(), 1000);
    EXPECT_GT(s->alarms(0).next_tick_unix_ms(), 0);
  }
  EXPECT_GE(homes.size(), 2u) << "the alarm grains all live on one silo";
  for (int a = 0; a < kAlarms; ++a) {
    EXPECT_TRUE(Eventually([&] { return Ticks(client, key(a)) >= 2; }))
        << key(a) << " does not tick";
  }

  // A silo other than the primary dies: every alarm keeps ticking, also
  // those whose grain lived there (it comes back on a survivor and reads the
  // ticks it counted from the primary).
  silos_[2]->Signal(SIGKILL);
  silos_[2]->Wait();
  clients_[2]->Close();
  clients_[2] = nullptr;
  std::vector<int64_t> after_kill(kAlarms, -1);
  for (int a = 0; a < kAlarms; ++a) {
    ASSERT_TRUE(Eventually([&] {
      after_kill[a] = Ticks(client, key(a));
      return after_kill[a] >= 2;
    })) << key(a) << " does not answer after the kill";
  }
  for (int a = 0; a < kAlarms; ++a) {
    EXPECT_TRUE(Eventually([&] {
      return Ticks(client, key(a)) >= after_kill[a] + 2;
    })) << key(a) << " stopped ticking when silo 2 died";
  }

  // Cancelled through the other non-primary silo's grains: no tick after.
  for (int a = 0; a < kAlarms; ++a) {
    examples::CancelAlarmRequest cancel;
    cancel.set_name("beat");
    absl::StatusOr<examples::AlarmState> s =
        client.Get<examples::AlarmRef>(key(a)).Cancel(cancel).Get();
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->alarms_size(), 1);
    EXPECT_EQ(s->alarms(0).period_ms(), 0) << "still listed after Cancel";
  }
  std::vector<int64_t> cancelled(kAlarms);
  for (int a = 0; a < kAlarms; ++a) cancelled[a] = Ticks(client, key(a));
  absl::SleepFor(absl::Milliseconds(2500));
  for (int a = 0; a < kAlarms; ++a) {
    EXPECT_EQ(Ticks(client, key(a)), cancelled[a]) << key(a) << " ticked after Cancel";
  }
}

}  // namespace
}  // namespace granary::testing
