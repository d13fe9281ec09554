// Live migration (Grain::MigrateOnIdle, silo/runtime/migration.cc) in an
// InProcessCluster (testing/in_process_cluster.h): whole silos over a
// LoopbackNetwork whose links the tests black-hole, on one FakeClock.
// A grain that moves while callers hammer it answers every call once, in
// order per caller, with its state (persistent and in memory) intact; a
// move that races a silo's crash ends with one activation and every
// acknowledged write kept.
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "granary/v1/cluster.pb.h"
#include "gtest/gtest.h"
#include "testing/in_process_cluster.h"
#include "tests/cluster_grains.h"

namespace granary::testing {
namespace {

using clustertest::CountReply;
using clustertest::CountRequest;
using clustertest::Location;
using clustertest::MoveRequest;
using clustertest::MoverRef;
using clustertest::WhereRequest;
using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using Fault = InProcessCluster::Fault;

InProcessClusterOptions MoverSilos(int silos) {
  InProcessClusterOptions o;
  o.silos = silos;
  o.grains = [](silo::SiloHost& host) { (void)host.AddGrain<MoverGrain>(); };
  return o;
}

// The answer of a call, awaited on real time while the test's clock stands.
template <typename T>
absl::StatusOr<T> Await(Task<T> task) {
  auto done = std::make_shared<Notification>();
  auto result = std::make_shared<absl::StatusOr<T>>(
      absl::DeadlineExceededError("no answer within a real minute"));
  Detach(std::move(task), [done, result](absl::StatusOr<T> r) {
    *result = std::move(r);
    done->Notify();
  });
  (void)done->WaitForNotificationWithTimeout(absl::Minutes(1));
  return *result;
}

absl::StatusOr<CountReply> Count(InProcessCluster& c, int via,
                                 const std::string& key,
                                 const std::string& caller, int64_t seq,
                                 bool write) {
  CountRequest r;
  r.set_caller(caller);
  r.set_seq(seq);
  r.set_write(write);
  return Await(c.silo(via).Get<MoverRef>(key).Count(r));
}

absl::StatusOr<CountReply> WhereIs(InProcessCluster& c, int via,
                                   const std::string& key) {
  return Await(c.silo(via).Get<MoverRef>(key).Where(WhereRequest()));
}

// A Mover whose activation lives on silo `host`.
std::string MoverOn(InProcessCluster& c, int host, const std::string& tag) {
  for (int k = 0;; ++k) {
    const std::string key = absl::StrCat(tag, k);
    absl::StatusOr<CountReply> r = WhereIs(c, host, key);
    if (r.ok() && r->at().silo() == c.id(host)) return key;
  }
}

uint64_t MovedOut(InProcessCluster& c) {
  uint64_t n = 0;
  for (int i = 0; i < c.size(); ++i) {
    if (c.running(i)) n += c.router(i).migrated_out();
  }
  return n;
}

// Eight callers, each through one of the silos, send numbered calls (every
// fifth one an acknowledged write) while the grain is moved three times.
TEST(MigrationInProcessTest, AGrainMovesWhileEightCallersHammerIt) {
  InProcessCluster c(MoverSilos(3));
  ASSERT_THAT(c.Start(), IsOk());
  const std::string key = MoverOn(c, 0, "hammered");
  constexpr int kCallers = 8;
  constexpr int kCalls = 60;
  std::vector<std::vector<absl::StatusOr<CountReply>>> replies(kCallers);
  std::atomic<int> answered{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      for (int seq = 1; seq <= kCalls; ++seq) {
        replies[i].push_back(Count(c, i % c.size(), key,
                                   absl::StrCat("caller", i), seq,
                                   /*write=*/seq % 5 == 0));
        answered.fetch_add(1);
      }
    });
  }
  std::set<std::string> silos_seen;
  for (int move = 1; move <= 3; ++move) {
    // Each move while the callers are mid-way.
    ASSERT_TRUE(c.AdvanceUntil(
        [&] { return answered.load() >= move * kCallers * kCalls / 4; },
        absl::Milliseconds(10), 3000));
    absl::StatusOr<Location> from =
        Await(c.silo(move % c.size()).Get<MoverRef>(key).Move(MoveRequest()));
    ASSERT_THAT(from, IsOk());
    silos_seen.insert(from->silo());
    ASSERT_TRUE(c.AdvanceUntil([&] {
      return MovedOut(c) >= static_cast<uint64_t>(move);
    })) << "move "
        << move << " did not happen";
  }
  ASSERT_TRUE(
      c.AdvanceUntil([&] { return answered.load() == kCallers * kCalls; },
                     absl::Milliseconds(10), 3000));
  for (std::thread& t : callers) t.join();
  std::set<uint64_t> activations;
  for (int i = 0; i < kCallers; ++i) {
    ASSERT_EQ(replies[i].size(), static_cast<size_t>(kCalls));
    for (int seq = 1; seq <= kCalls; ++seq) {
      const absl::StatusOr<CountReply>& r = replies[i][seq - 1];
      ASSERT_THAT(r, IsOk()) << "caller " << i << " call " << seq;
      // Once, and in order: the grain saw this caller's previous call last.
      EXPECT_EQ(r->previous(), seq - 1) << "caller " << i << " call " << seq;
      activations.insert(r->at().activation());
      silos_seen.insert(r->at().silo());
    }
  }
  EXPECT_EQ(MovedOut(c), 3u);
  EXPECT_GE(activations.size(), 4u);  // the first and three moved ones
  EXPECT_GE(silos_seen.size(), 2u);
  // Every call counted, by the persistent state and by what stayed in
  // memory between writes (OnDehydrate/OnRehydrate).
  absl::StatusOr<CountReply> last = WhereIs(c, 0, key);
  ASSERT_THAT(last, IsOk());
  EXPECT_EQ(last->total(), kCallers * kCalls);
  // One activation: every silo reaches the same one.
  for (int i = 1; i < c.size(); ++i) {
    absl::StatusOr<CountReply> seen = WhereIs(c, i, key);
    ASSERT_THAT(seen, IsOk());
    EXPECT_EQ(seen->at().activation(), last->at().activation());
  }
}

// What stays in memory between writes moves too: calls counted without a
// write are still counted after the move, and the new activation did not
// read the (older) stored state.
TEST(MigrationInProcessTest, StateInMemoryMovesWithoutAStorageRead) {
  InProcessCluster c(MoverSilos(2));
  ASSERT_THAT(c.Start(), IsOk());
  const std::string key = MoverOn(c, 0, "unsaved");
  ASSERT_THAT(Count(c, 0, key, "a", 1, /*write=*/true), IsOk());
  for (int seq = 2; seq <= 4; ++seq) {
    ASSERT_THAT(Count(c, 0, key, "a", seq, /*write=*/false), IsOk());
  }
  ASSERT_THAT(Await(c.silo(0).Get<MoverRef>(key).Move(MoveRequest())), IsOk());
  ASSERT_TRUE(c.AdvanceUntil([&] { return MovedOut(c) == 1; }));
  absl::StatusOr<CountReply> after = WhereIs(c, 0, key);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->at().silo(), c.id(1));
  EXPECT_EQ(after->total(), 4);    // 1 stored, 3 in memory only
  EXPECT_EQ(after->unsaved(), 3);  // carried by OnDehydrate
  EXPECT_EQ(c.router(1).migrated_in(), 1u);
  // Its next write succeeds: the etag came along.
  absl::StatusOr<CountReply> wrote = Count(c, 1, key, "a", 5, true);
  ASSERT_THAT(wrote, IsOk());
  EXPECT_EQ(wrote->total(), 5);
}

// A silo alone has nowhere to move a grain: it deactivates instead, and
// the next call reads the stored state.
TEST(MigrationInProcessTest, WithNoOtherSiloTheGrainDeactivates) {
  InProcessCluster c(MoverSilos(1));
  ASSERT_THAT(c.Start(), IsOk());
  ASSERT_THAT(Count(c, 0, "alone", "a", 1, /*write=*/true), IsOk());
  ASSERT_THAT(Count(c, 0, "alone", "a", 2, /*write=*/false), IsOk());
  absl::StatusOr<Location> before =
      Await(c.silo(0).Get<MoverRef>("alone").Move(MoveRequest()));
  ASSERT_THAT(before, IsOk());
  absl::StatusOr<CountReply> after;
  ASSERT_TRUE(c.AdvanceUntil([&] {
    after = WhereIs(c, 0, "alone");
    return after.ok() && after->at().activation() != before->activation();
  }));
  EXPECT_EQ(after->total(), 1);  // the stored state: the unsaved call is gone
  EXPECT_EQ(MovedOut(c), 0u);
}

// The source crashes while its hand-over is in flight (held by a black
// hole): the target finds nothing to move and drops it; the grain comes
// back from its stored state, every acknowledged write in it, once.
TEST(MigrationInProcessTest, ASourceThatCrashesMidMoveLosesNoWrite) {
  InProcessCluster c(MoverSilos(3));
  ASSERT_THAT(c.Start(), IsOk());
  const std::string key = MoverOn(c, 0, "crash");
  for (int seq = 1; seq <= 5; ++seq) {
    ASSERT_THAT(Count(c, 0, key, "a", seq, /*write=*/true), IsOk());
  }
  const size_t held = c.net().held();
  c.net().SetFault(c.id(0), c.id(1), Fault::kBlackHole);
  c.net().SetFault(c.id(0), c.id(2), Fault::kBlackHole);
  ASSERT_THAT(Await(c.silo(0).Get<MoverRef>(key).Move(MoveRequest())), IsOk());
  ASSERT_TRUE(c.AdvanceUntil([&] { return c.net().held() > held; }));
  c.Kill(0);
  c.net().HealAll();  // the hand-over arrives after the crash
  absl::StatusOr<CountReply> after;
  ASSERT_TRUE(c.AdvanceUntil([&] {
    after = WhereIs(c, 1, key);
    return after.ok();
  }));
  EXPECT_EQ(after->total(), 5);
  EXPECT_NE(after->at().silo(), c.id(0));
  absl::StatusOr<CountReply> other = WhereIs(c, 2, key);
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(other->at().activation(), after->at().activation());
}

// The silos that could take it crash while the hand-over is in flight:
// the source deactivates it, and it comes back from its stored state.
TEST(MigrationInProcessTest, ATargetThatCrashesMidMoveLeavesOneActivation) {
  InProcessCluster c(MoverSilos(3));
  ASSERT_THAT(c.Start(), IsOk());
  const std::string key = MoverOn(c, 0, "lost");
  for (int seq = 1; seq <= 3; ++seq) {
    ASSERT_THAT(Count(c, 0, key, "a", seq, /*write=*/true), IsOk());
  }
  const size_t held = c.net().held();
  c.net().SetFault(c.id(0), c.id(1), Fault::kBlackHole);
  c.net().SetFault(c.id(0), c.id(2), Fault::kBlackHole);
  absl::StatusOr<Location> before =
      Await(c.silo(0).Get<MoverRef>(key).Move(MoveRequest()));
  ASSERT_THAT(before, IsOk());
  ASSERT_TRUE(c.AdvanceUntil([&] { return c.net().held() > held; }));
  c.Kill(1);
  c.Kill(2);
  c.net().HealAll();
  absl::StatusOr<CountReply> after;
  ASSERT_TRUE(c.AdvanceUntil([&] {
    after = WhereIs(c, 0, key);
    return after.ok() && after->at().activation() != before->activation();
  }));
  EXPECT_EQ(after->at().silo(), c.id(0));
  EXPECT_EQ(after->total(), 3);
  EXPECT_EQ(MovedOut(c), 0u);
}

// A graceful leave hands the silo's grains to the others with their state
// in memory (no storage read), while a caller keeps calling them: no call
// fails, and every call is counted once.
TEST(MigrationInProcessTest, AGracefulLeaveHandsItsGrainsOver) {
  InProcessCluster c(MoverSilos(3));
  ASSERT_THAT(c.Start(), IsOk());
  constexpr int kGrains = 10;
  std::vector<std::string> keys;
  for (int g = 0; g < kGrains; ++g) {
    keys.push_back(MoverOn(c, 0, absl::StrCat("leaving", g, "-")));
    ASSERT_THAT(Count(c, 0, keys.back(), "a", 1, /*write=*/true), IsOk());
    ASSERT_THAT(Count(c, 0, keys.back(), "a", 2, /*write=*/false), IsOk());
  }
  std::atomic<bool> stop{false};
  std::atomic<bool> caller_done{false};
  std::vector<int64_t> sent(kGrains, 2);
  std::vector<absl::Status> failures;
  std::thread caller([&] {
    while (!stop.load()) {
      for (int g = 0; g < kGrains; ++g) {
        absl::StatusOr<CountReply> r =
            Count(c, 1, keys[g], "a", sent[g] + 1, /*write=*/false);
        if (!r.ok()) {
          failures.push_back(r.status());
        } else {
          ++sent[g];
          EXPECT_EQ(r->previous(), sent[g] - 1) << keys[g];
        }
      }
    }
    caller_done = true;
  });
  c.StopSilo(0);
  stop = true;
  // (Calls caught by the leave retry on the clock: it keeps moving.)
  ASSERT_TRUE(c.AdvanceUntil([&] { return caller_done.load(); },
                             absl::Milliseconds(10), 3000));
  caller.join();
  EXPECT_THAT(failures, ::testing::IsEmpty());
  EXPECT_EQ(c.router(1).migrated_in() + c.router(2).migrated_in(),
            static_cast<uint64_t>(kGrains));
  for (int g = 0; g < kGrains; ++g) {
    absl::StatusOr<CountReply> r;
    ASSERT_TRUE(c.AdvanceUntil([&] {
      r = WhereIs(c, 1, keys[g]);
      return r.ok();
    }));
    EXPECT_NE(r->at().silo(), c.id(0));
    // Every call counted, and the calls never written still in memory: the
    // new activation did not read the stored state (which holds 1).
    EXPECT_EQ(r->total(), sent[g]) << keys[g];
    EXPECT_EQ(r->unsaved(), sent[g] - 1) << keys[g];
  }
}

absl::StatusOr<v1::MigrationReply> Accept(InProcessCluster& c, int at,
                                          const v1::MigrationRequest& r) {
  Notification done;
  absl::StatusOr<v1::MigrationReply> result;
  c.silo(at).AcceptMigration(r, [&](absl::StatusOr<v1::MigrationReply> got) {
    result = std::move(got);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

// SiloControl.AcceptMigration refuses what it cannot take, and a move from
// an activation that is not the grain's entry changes nothing.
TEST(MigrationInProcessTest, ABadMigrationIsRefusedAndMovesNothing) {
  InProcessCluster c(MoverSilos(2));
  ASSERT_THAT(c.Start(), IsOk());
  const std::string key = MoverOn(c, 0, "kept");
  absl::StatusOr<CountReply> before = WhereIs(c, 0, key);
  ASSERT_THAT(before, IsOk());
  v1::MigrationRequest r;
  r.mutable_from()->set_type(std::string(MoverRef::Interface().type_name));
  r.mutable_from()->set_key(key);
  r.mutable_from()->set_silo(c.id(0));
  r.mutable_from()->set_activation_id(123456789);  // not its activation
  v1::MigrationRequest bad = r;
  bad.mutable_from()->clear_type();
  EXPECT_THAT(Accept(c, 1, bad), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = r;
  bad.mutable_from()->set_type("no.such.Type");
  EXPECT_THAT(Accept(c, 1, bad),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  bad = r;
  bad.mutable_from()->set_key(std::string(5000, 'k'));
  EXPECT_THAT(Accept(c, 1, bad), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = r;
  bad.set_has_state(true);
  bad.set_state("\x08\xff");  // a varint cut short
  EXPECT_THAT(Accept(c, 1, bad), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Accept(c, 1, r), StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<CountReply> after = WhereIs(c, 1, key);
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ(after->at().activation(), before->at().activation());
  EXPECT_EQ(c.router(1).migrated_in(), 0u);
}

}  // namespace
}  // namespace granary::testing
