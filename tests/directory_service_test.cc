// The distributed directory over real gRPC on 127.0.0.1: three silos, each
// owning its part of the ring; registrations from every silo reach the
// owner and agree on one winner per grain; a silo refuses grains it does
// not own and callers whose view is ahead of its own; the entries of a dead
// silo are purged and a stale own entry can be replaced.
#include "directory/directory_service.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/sync.h"
#include "core/testing/status_matchers.h"
#include "directory/directory_client.h"
#include "directory/directory_transport.h"
#include "directory/partition.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/callback_queue.h"

using ::granary::matchers::StatusIs;

namespace granary::silo {
namespace {

constexpr absl::string_view kType = "test.Grain";

struct TestOwner {
  // `clock` times the dead silos' grace.
  explicit TestOwner(const Clock* clock) : owner("", clock) {
    rpc::HoldGrpcCallbackQueue();  // see rpc/callback_queue.h
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    service = std::make_unique<directory::DirectoryService>(&owner);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    address = absl::StrCat("127.0.0.1:", port);
    id = address + "@1";
    owner.set_self_id(id);
  }
  ~TestOwner() {
    server->Shutdown(absl::ToChronoTime(absl::Now()));
    server->Wait();
  }
  void OnView(const v1::MembershipView& v) {
    owner.OnView(v);
    transport.OnView(v);
  }

  directory::DirectoryPartition owner;
  directory::GrpcDirectoryTransport transport;
  directory::DirectoryClient directory{&owner, &transport};
  std::unique_ptr<directory::DirectoryService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
  std::string id;
};

// Runs a directory request to its answer.
absl::StatusOr<v1::DirectoryReply> Wait(
    Task<absl::StatusOr<v1::DirectoryReply>> request) {
  absl::StatusOr<absl::StatusOr<v1::DirectoryReply>> r =
      std::move(request).Get();
  if (!r.ok()) return r.status();
  return *std::move(r);
}

v1::DirectoryEntry Entry(const std::string& key, const std::string& silo,
                         uint64_t activation) {
  v1::DirectoryEntry e;
  e.set_type(std::string(kType));
  e.set_key(key);
  e.set_silo(silo);
  e.set_activation_id(activation);
  return e;
}

class DirectoryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      silos_.push_back(std::make_unique<TestOwner>(&clock_));
    }
    Publish({});
    for (int i = 0; i < 3; ++i) Report(i, {});
    for (auto& s : silos_) ASSERT_FALSE(s->owner.rebuilding());
  }
  // Silo `from` reports the activations it hosts (keys) to every owner of
  // the current ring, as its router does after a ring change.
  void Report(int from, const std::vector<std::string>& keys) {
    TestOwner& f = *silos_[from];
    std::map<std::string, v1::RebuildRequest> by_owner;
    for (int i = 0; i < 3; ++i) {
      if (dead_.count(i) == 0) by_owner[silos_[i]->id];
    }
    for (const std::string& key : keys) {
      *by_owner[f.owner.OwnerOf(GrainId(kType, key))].add_entries() =
          Entry(key, f.id, 1);
    }
    for (auto& [owner, request] : by_owner) {
      request.set_ring(f.owner.ring_fingerprint());
      request.set_from(f.id);
      absl::StatusOr<absl::StatusOr<v1::RebuildReply>> got =
          f.directory.Rebuild(owner, request).Get();
      ASSERT_TRUE(got.ok()) << got.status();
      absl::StatusOr<v1::RebuildReply> out = *std::move(got);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->conflicts_size(), 0);
    }
  }
  // Every silo adopts the next view: all Active except `dead`.
  void Publish(const std::vector<int>& dead) {
    v1::MembershipView view;
    view.set_version(++version_);
    for (int i = 0; i < 3; ++i) {
      v1::Member* m = view.add_members();
      m->set_address(silos_[i]->address);
      m->set_generation(1);
      const bool is_dead = std::find(dead.begin(), dead.end(), i) != dead.end();
      m->set_status(is_dead ? v1::MEMBER_DEAD : v1::MEMBER_ACTIVE);
      if (is_dead) dead_.insert(i);
    }
    for (auto& s : silos_) s->OnView(view);
  }

  FakeClock clock_;  // times the dead silos' grace
  std::vector<std::unique_ptr<TestOwner>> silos_;
  std::set<int> dead_;
  int64_t version_ = 0;
};

TEST_F(DirectoryServiceTest, RacingRegistrationsFromEverySiloAgreeOnOneWinner) {
  constexpr int kGrains = 300;
  std::vector<std::vector<std::string>> winners(
      3, std::vector<std::string>(kGrains));
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int s = 0; s < 3; ++s) {
    threads.emplace_back([&, s] {
      for (int g = 0; g < kGrains; ++g) {
        auto r = Wait(silos_[s]->directory.Register(
            Entry(absl::StrCat("g", g), silos_[s]->id, g + 1)));
        if (!r.ok()) {
          ++errors;
          continue;
        }
        winners[s][g] = r->entry().silo();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  std::vector<int> per_owner(3, 0);
  for (int g = 0; g < kGrains; ++g) {
    EXPECT_FALSE(winners[0][g].empty());
    EXPECT_EQ(winners[0][g], winners[1][g]) << g;
    EXPECT_EQ(winners[0][g], winners[2][g]) << g;
    // The entry lives at the grain's owner only.
    const GrainId id(kType, absl::StrCat("g", g));
    const std::string owner = silos_[0]->owner.OwnerOf(id);
    for (int s = 0; s < 3; ++s) {
      if (silos_[s]->id == owner) ++per_owner[s];
    }
  }
  size_t stored = 0;
  for (auto& s : silos_) stored += s->owner.size();
  EXPECT_EQ(stored, static_cast<size_t>(kGrains));
  for (int s = 0; s < 3; ++s) {
    EXPECT_GT(per_owner[s], 0);  // every silo owns some grains...
    // ...and holds exactly the entries of the grains it owns.
    EXPECT_EQ(silos_[s]->owner.size(), static_cast<size_t>(per_owner[s]));
  }
  // Lookups from any silo find the winner.
  auto found = Wait(silos_[2]->directory.Lookup(GrainId(kType, "g7")));
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(found->found());
  EXPECT_EQ(found->entry().silo(), winners[0][7]);
}

TEST_F(DirectoryServiceTest, NonOwnersAndStaleOwnersRefuse) {
  const GrainId id(kType, "x");
  const std::string owner = silos_[0]->owner.OwnerOf(id);
  TestOwner* not_owner = nullptr;
  for (auto& s : silos_) {
    if (s->id != owner) not_owner = s.get();
  }
  ASSERT_NE(not_owner, nullptr);
  v1::DirectoryRequest request;
  *request.mutable_entry() = Entry("x", not_owner->id, 1);
  request.set_view_version(version_);
  EXPECT_THAT(not_owner->owner.Register(request),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  TestOwner* the_owner = nullptr;
  for (auto& s : silos_) {
    if (s->id == owner) the_owner = s.get();
  }
  request.set_view_version(version_ + 5);  // the caller knows a newer view
  EXPECT_THAT(the_owner->owner.Register(request),
              StatusIs(absl::StatusCode::kUnavailable));
  // Bad input.
  request.set_view_version(version_);
  *request.mutable_entry() = Entry("x", "10.0.0.9:1@1", 1);  // not a member
  EXPECT_THAT(the_owner->owner.Register(request),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  *request.mutable_entry() = Entry("x", the_owner->id, 1);
  *request.mutable_replace() = Entry("x", not_owner->id, 1);  // not its own
  EXPECT_THAT(the_owner->owner.Register(request),
              StatusIs(absl::StatusCode::kInvalidArgument));
  request.clear_replace();
  request.mutable_entry()->set_type(std::string(300, 't'));
  EXPECT_THAT(the_owner->owner.Lookup(request),
              StatusIs(absl::StatusCode::kInvalidArgument));
  request.mutable_entry()->set_type(std::string(kType));
  request.mutable_entry()->set_key("");
  EXPECT_THAT(the_owner->owner.Register(request),
              StatusIs(absl::StatusCode::kInvalidArgument));
  request.mutable_entry()->set_key("x");
  request.mutable_entry()->set_type("");
  EXPECT_THAT(the_owner->owner.Lookup(request),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(DirectoryServiceTest, ADeadSilosEntriesGoAndAStaleOwnEntryIsReplaced) {
  // Register grains hosted on silo 2 from silo 2.
  for (int g = 0; g < 60; ++g) {
    auto r = Wait(silos_[2]->directory.Register(
        Entry(absl::StrCat("d", g), silos_[2]->id, 1)));
    ASSERT_TRUE(r.ok()) << r.status();
  }
  // Grains hosted on silos 0 and 1, to see which entries survive.
  std::map<std::string, std::string> owner_before;
  for (int g = 0; g < 60; ++g) {
    const std::string key = absl::StrCat("live", g);
    auto r = Wait(
        silos_[g % 2]->directory.Register(Entry(key, silos_[g % 2]->id, 1)));
    ASSERT_TRUE(r.ok()) << r.status();
    owner_before[key] = silos_[0]->owner.OwnerOf(GrainId(kType, key));
  }
  Publish({2});  // silo 2 dies: its activations are gone
  // Until the survivors reported their activations, a grain of a range
  // that moved is neither found nor registrable: "not found" could be wrong.
  int survived = 0, moved = 0;
  for (const auto& [key, owner] : owner_before) {
    auto r = Wait(silos_[0]->directory.Lookup(GrainId(kType, key)));
    if (silos_[0]->owner.OwnerOf(GrainId(kType, key)) == owner) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(r->found()) << key << ": its owner did not change";
      ++survived;
    } else {
      EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable)) << key;
      auto reg =
          Wait(silos_[1]->directory.Register(Entry(key, silos_[1]->id, 7)));
      EXPECT_THAT(reg, StatusIs(absl::StatusCode::kUnavailable)) << key;
      ++moved;
    }
  }
  EXPECT_GT(survived, 0);
  EXPECT_GT(moved, 0);
  // The survivors report what they host; every live grain's entry is back,
  // naming the silo that hosts it, and the dead silo's grains are gone.
  std::vector<std::string> on0, on1;
  for (int g = 0; g < 60; ++g) {
    (g % 2 == 0 ? on0 : on1).push_back(absl::StrCat("live", g));
  }
  Report(0, on0);
  EXPECT_TRUE(silos_[0]->owner.rebuilding() || silos_[1]->owner.rebuilding());
  Report(1, on1);
  EXPECT_FALSE(silos_[0]->owner.rebuilding());
  EXPECT_FALSE(silos_[1]->owner.rebuilding());
  for (int g = 0; g < 60; ++g) {
    auto r = Wait(
        silos_[0]->directory.Lookup(GrainId(kType, absl::StrCat("live", g))));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->found()) << g;
    EXPECT_EQ(r->entry().silo(), silos_[g % 2]->id);
  }
  for (int g = 0; g < 60; ++g) {
    auto r =
        Wait(silos_[0]->directory.Lookup(GrainId(kType, absl::StrCat("d", g))));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->found()) << g;
  }
  // Silo 0 registers activation 1 of "s", then (that activation gone)
  // replaces its own stale entry with activation 2.
  auto first =
      Wait(silos_[0]->directory.Register(Entry("s", silos_[0]->id, 1)));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->entry().activation_id(), 1u);
  auto plain =
      Wait(silos_[0]->directory.Register(Entry("s", silos_[0]->id, 2)));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->entry().activation_id(), 1u);  // absent-only: no change
  const v1::DirectoryEntry stale = Entry("s", silos_[0]->id, 1);
  auto replaced =
      Wait(silos_[0]->directory.Register(Entry("s", silos_[0]->id, 2), stale));
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->entry().activation_id(), 2u);
  // Unregister removes only the entry it names.
  auto kept =
      Wait(silos_[1]->directory.Unregister(Entry("s", silos_[0]->id, 1)));
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->found());
  auto gone =
      Wait(silos_[1]->directory.Unregister(Entry("s", silos_[0]->id, 2)));
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->found());
  // A migration moves only from the entry in force: "s" has none now, so
  // the target's move is refused; the source's confirmation of a move
  // that succeeded registers the new entry all the same.
  auto refused = Wait(silos_[1]->directory.Move(Entry("s", silos_[1]->id, 9),
                                                Entry("s", silos_[0]->id, 2)));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAborted);
  auto confirmed = Wait(silos_[0]->directory.Move(Entry("s", silos_[1]->id, 9),
                                                  Entry("s", silos_[0]->id, 2),
                                                  /*confirm=*/true));
  ASSERT_TRUE(confirmed.ok()) << confirmed.status();
  EXPECT_EQ(confirmed->entry().silo(), silos_[1]->id);
  EXPECT_EQ(confirmed->entry().activation_id(), 9u);
  // A move from the entry in force replaces it.
  auto back = Wait(silos_[0]->directory.Move(Entry("s", silos_[0]->id, 3),
                                             Entry("s", silos_[1]->id, 9)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->entry().silo(), silos_[0]->id);
  EXPECT_EQ(back->entry().activation_id(), 3u);
}

TEST_F(DirectoryServiceTest, RebuildReportsAreCheckedAndConflictsReported) {
  TestOwner& o = *silos_[0];
  // A key silo 0 owns.
  std::string key;
  for (int g = 0; key.empty(); ++g) {
    const std::string k = absl::StrCat("k", g);
    if (o.owner.OwnerOf(GrainId(kType, k)) == o.id) key = k;
  }
  v1::RebuildRequest r;
  r.set_ring(o.owner.ring_fingerprint());
  r.set_from(silos_[1]->id);
  *r.add_entries() = Entry(key, silos_[1]->id, 5);
  v1::RebuildRequest bad = r;
  bad.set_ring(r.ring() + 1);  // another ring
  EXPECT_THAT(o.owner.Rebuild(bad), StatusIs(absl::StatusCode::kUnavailable));
  bad = r;
  bad.set_from("10.0.0.9:1@1");  // not a member
  bad.mutable_entries(0)->set_silo("10.0.0.9:1@1");
  EXPECT_THAT(o.owner.Rebuild(bad),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  bad = r;
  bad.mutable_entries(0)->set_silo(silos_[2]->id);  // not the sender's
  EXPECT_THAT(o.owner.Rebuild(bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = r;
  bad.mutable_entries(0)->set_key("");
  EXPECT_THAT(o.owner.Rebuild(bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
  bad = r;
  bad.mutable_entries(0)->set_type(std::string(300, 't'));
  EXPECT_THAT(o.owner.Rebuild(bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::string foreign;
  for (int g = 0; foreign.empty(); ++g) {
    const std::string k = absl::StrCat("f", g);
    if (o.owner.OwnerOf(GrainId(kType, k)) != o.id) foreign = k;
  }
  bad = r;
  *bad.add_entries() = Entry(foreign, silos_[1]->id, 6);  // not owned
  EXPECT_THAT(o.owner.Rebuild(bad),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Nothing of the refused reports was registered.
  v1::DirectoryRequest lookup;
  *lookup.mutable_entry() = Entry(key, "", 0);
  auto found = o.owner.Lookup(lookup);
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->found());
  // A good report registers; a second silo claiming the same grain is told
  // it conflicts, and the first entry stays.
  auto ok = o.owner.Rebuild(r);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->conflicts_size(), 0);
  v1::RebuildRequest other = r;
  other.set_from(silos_[2]->id);
  other.mutable_entries(0)->set_silo(silos_[2]->id);
  auto conflict = o.owner.Rebuild(other);
  ASSERT_TRUE(conflict.ok());
  ASSERT_EQ(conflict->conflicts_size(), 1);
  found = o.owner.Lookup(lookup);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->entry().silo(), silos_[1]->id);
}

// A silo declared dead may still run grain code until its lease ends (it
// may be cut off from the others but not from the table): through that
// grace its entries stay, and nothing of the ranges it owned is answered
// "not found" even once every live silo reported.
TEST_F(DirectoryServiceTest, ADeadSilosGraceKeepsItsGrainsFromMoving) {
  for (auto& s : silos_) s->owner.set_dead_grace(absl::Milliseconds(600));
  // Grains hosted on silo 2, registered at their owners.
  std::vector<std::string> keys;
  for (int g = 0; g < 60; ++g) {
    keys.push_back(absl::StrCat("h", g));
    auto r = Wait(
        silos_[2]->directory.Register(Entry(keys.back(), silos_[2]->id, 1)));
    ASSERT_TRUE(r.ok()) << r.status();
  }
  std::map<std::string, std::string> owner_before;
  for (const std::string& k : keys) {
    owner_before[k] = silos_[0]->owner.OwnerOf(GrainId(kType, k));
  }
  Publish({2});
  Report(0, {});
  Report(1, {});
  // Within the grace (the clock has not moved): every grain is asked.
  int kept = 0, held = 0;
  for (const std::string& k : keys) {
    auto r = Wait(silos_[0]->directory.Lookup(GrainId(kType, k)));
    if (owner_before[k] != silos_[2]->id) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(r->found()) << k << ": the dead silo's entry is kept";
      ++kept;
    } else {
      EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable)) << k;
      ++held;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(held, 0);
  // A moment before the grace ends, still nothing moved.
  clock_.Advance(absl::Milliseconds(599));
  for (const std::string& k : keys) {
    auto r = Wait(silos_[1]->directory.Lookup(GrainId(kType, k)));
    if (r.ok()) {
      EXPECT_TRUE(r->found()) << k << ": gone before the grace ended";
    } else {
      EXPECT_THAT(r, StatusIs(absl::StatusCode::kUnavailable)) << k;
    }
  }
  // After the grace its grains are gone everywhere.
  clock_.Advance(absl::Milliseconds(1));
  for (const std::string& k : keys) {
    auto r = Wait(silos_[1]->directory.Lookup(GrainId(kType, k)));
    ASSERT_TRUE(r.ok()) << k << ": " << r.status();
    EXPECT_FALSE(r->found()) << k;
  }
}

TEST_F(DirectoryServiceTest, APartialReportDoesNotCompleteTheRebuild) {
  Publish({2});
  for (auto& s : silos_) {
    if (s.get() != silos_[2].get()) {
      EXPECT_TRUE(s->owner.rebuilding());
    }
  }
  TestOwner& o = *silos_[0];
  for (int from = 0; from < 2; ++from) {
    v1::RebuildRequest r;
    r.set_ring(o.owner.ring_fingerprint());
    r.set_from(silos_[from]->id);
    r.set_more(true);
    ASSERT_TRUE(o.owner.Rebuild(r).ok());
  }
  EXPECT_TRUE(o.owner.rebuilding());  // parts, not the last ones
  Report(0, {});
  Report(1, {});
  EXPECT_FALSE(o.owner.rebuilding());
}

}  // namespace
}  // namespace granary::silo
