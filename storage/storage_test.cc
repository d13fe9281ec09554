// GrainStorage providers: the contract both providers keep (etags, ABORTED
// on a stale etag, clear, one winner among racing writers), and what only
// RocksDB has (reopen, locked, foreign or other-format directories).
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/detach.h"
#include "core/status.h"
#include "core/sync.h"
#include "core/testing/run_task.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "storage/membership_table.h"
#include "storage/memory_storage.h"
#include "storage/rocksdb_storage.h"
#include "storage/storage_test_util.h"

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;

namespace granary::storage {
namespace {

using ::testing::HasSubstr;

class StorageContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      storage_ = std::make_unique<MemoryStorage>();
    } else {
      RocksDbOptions options;
      options.data_dir = TempDir("contract");
      auto opened = RocksDbStorage::Open(options);
      ASSERT_THAT(opened, IsOk());
      storage_ = std::move(*opened);
    }
  }
  std::unique_ptr<GrainStorage> storage_;
};

TEST_P(StorageContractTest, WritesReadBackWithChangingEtags) {
  GrainId id(kType, "alice");
  absl::StatusOr<StoredState> none = ReadNow(*storage_, id);
  ASSERT_THAT(none, IsOk());
  EXPECT_FALSE(none->exists);
  EXPECT_EQ(none->etag, "");

  absl::StatusOr<std::string> e1 = WriteNow(*storage_, id, "v1", "");
  ASSERT_TRUE(e1.ok()) << e1.status();
  EXPECT_NE(*e1, "");
  absl::StatusOr<std::string> e2 = WriteNow(*storage_, id, "v2", *e1);
  ASSERT_TRUE(e2.ok()) << e2.status();
  EXPECT_NE(*e2, *e1);
  absl::StatusOr<StoredState> read = ReadNow(*storage_, id);
  ASSERT_THAT(read, IsOk());
  EXPECT_TRUE(read->exists);
  EXPECT_EQ(read->bytes, "v2");
  EXPECT_EQ(read->etag, *e2);

  // Binary state and keys that share a prefix stay apart.
  const std::string binary("\0\xff\x01", 3);
  const GrainId with_nul(kType, std::string("alice\0x", 7));
  ASSERT_THAT(WriteNow(*storage_, with_nul, binary, ""), IsOk());
  EXPECT_EQ(ReadNow(*storage_, with_nul)->bytes, binary);
  ASSERT_THAT(WriteNow(*storage_, GrainId("test.Other", "alice"), "other", ""),
              IsOk());
  EXPECT_EQ(ReadNow(*storage_, id)->bytes, "v2");
}

TEST_P(StorageContractTest, StaleEtagsAreAborted) {
  GrainId id(kType, "bob");
  absl::StatusOr<std::string> e1 = WriteNow(*storage_, id, "v1", "");
  ASSERT_THAT(e1, IsOk());
  absl::StatusOr<std::string> blind = WriteNow(*storage_, id, "x", "");
  EXPECT_THAT(blind, StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(blind.status().message(), HasSubstr("stale etag"));
  EXPECT_THAT(WriteNow(*storage_, id, "x", "12345"),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(ClearNow(*storage_, id, "nope"),
              StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(ReadNow(*storage_, id)->bytes, "v1");  // nothing lost

  ASSERT_THAT(ClearNow(*storage_, id, *e1), IsOk());
  EXPECT_FALSE(ReadNow(*storage_, id)->exists);
  // After a clear the grain starts again from "no state".
  absl::StatusOr<std::string> again = WriteNow(*storage_, id, "v3", "");
  ASSERT_THAT(again, IsOk());
  EXPECT_NE(*again, *e1);
}

TEST_P(StorageContractTest, OfRacingWritersWithOneEtagExactlyOneWins) {
  GrainId id(kType, "raced");
  absl::StatusOr<std::string> base = WriteNow(*storage_, id, "base", "");
  ASSERT_THAT(base, IsOk());
  constexpr int kWriters = 8;
  std::vector<absl::StatusOr<std::string>> results(kWriters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      results[i] = WriteNow(*storage_, id, absl::StrCat("w", i), *base);
    });
  }
  for (auto& t : threads) t.join();
  int won = 0, aborted = 0;
  std::string winner;
  for (int i = 0; i < kWriters; ++i) {
    if (results[i].ok()) {
      ++won;
      winner = absl::StrCat("w", i);
    } else if (results[i].status().code() == absl::StatusCode::kAborted) {
      ++aborted;
    }
  }
  EXPECT_EQ(won, 1);
  EXPECT_EQ(aborted, kWriters - 1);
  EXPECT_EQ(ReadNow(*storage_, id)->bytes, winner);
}

TEST_P(StorageContractTest, ManyConcurrentWritersToDifferentGrains) {
  constexpr int kGrains = 200;
  Mutex mu;
  int done = 0, ok = 0;
  for (int i = 0; i < kGrains; ++i) {
    // Started, not awaited: every write is in flight at once.
    Detach(storage_->Write(GrainId(kType, absl::StrCat("g", i)),
                           absl::StrCat(i), ""),
           [&](absl::StatusOr<absl::StatusOr<std::string>> r) {
             MutexLock lock(&mu);
             ++done;
             if (Flatten(std::move(r)).ok()) ++ok;
           });
  }
  {
    MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(
        [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done == kGrains; },
        absl::Seconds(60)));
    EXPECT_EQ(ok, kGrains);
  }
  for (int i = 0; i < kGrains; ++i) {
    EXPECT_EQ(ReadNow(*storage_, GrainId(kType, absl::StrCat("g", i)))->bytes,
              absl::StrCat(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Providers, StorageContractTest,
                         ::testing::Values("memory", "rocksdb"));

TEST(RocksDbStorageTest, StateSurvivesReopen) {
  RocksDbOptions options;
  options.data_dir = TempDir("reopen");
  std::string etag;
  {
    auto s = RocksDbStorage::Open(options);
    ASSERT_THAT(s, IsOk());
    absl::StatusOr<std::string> e = WriteNow(**s, GrainId(kType, "k"), "kept", "");
    ASSERT_THAT(e, IsOk());
    etag = *e;
  }
  auto s = RocksDbStorage::Open(options);
  ASSERT_THAT(s, IsOk());
  absl::StatusOr<StoredState> read = ReadNow(**s, GrainId(kType, "k"));
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->bytes, "kept");
  EXPECT_EQ(read->etag, etag);
  // The etag from before the restart is still the one to write with.
  absl::StatusOr<std::string> next = WriteNow(**s, GrainId(kType, "k"), "more", etag);
  ASSERT_THAT(next, IsOk());
  EXPECT_NE(*next, etag);
}

// The writer thread acknowledges a write after its group is durable, by
// resuming the awaiting coroutine there; the caller's thread never runs it.
Task<absl::StatusOr<std::string>> WriteAndNoteThread(GrainStorage& s,
                                                     std::thread::id* on) {
  absl::StatusOr<std::string> etag =
      co_await s.Write(GrainId(kType, "thread"), "v", "");
  *on = std::this_thread::get_id();
  co_return etag;
}

TEST(RocksDbStorageTest, AWriteResumesItsAwaiterOnTheWriterThread) {
  RocksDbOptions options;
  options.data_dir = TempDir("writer-thread");
  auto s = RocksDbStorage::Open(options);
  ASSERT_THAT(s, IsOk());
  std::thread::id resumed_on;
  absl::StatusOr<std::string> etag =
      RunTask(WriteAndNoteThread(**s, &resumed_on));
  ASSERT_THAT(etag, IsOk());
  EXPECT_NE(resumed_on, std::this_thread::get_id());
  EXPECT_NE(resumed_on, std::thread::id());
  EXPECT_EQ(ReadNow(**s, GrainId(kType, "thread"))->etag, *etag);
}

TEST(RocksDbStorageTest, ADirectoryHeldByAnotherOpenerIsRefused) {
  RocksDbOptions options;
  options.data_dir = TempDir("locked");
  auto first = RocksDbStorage::Open(options);
  ASSERT_THAT(first, IsOk());
  auto second = RocksDbStorage::Open(options);
  EXPECT_THAT(second, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another process"));
}

TEST(RocksDbStorageTest, AForeignDirectoryIsRefusedAndLeftUntouched) {
  RocksDbOptions options;
  options.data_dir = TempDir("foreign");
  const std::string grains = options.data_dir + "/grains";
  std::filesystem::create_directories(grains);
  { std::ofstream(grains + "/notes.txt") << "mine"; }
  auto opened = RocksDbStorage::Open(options);
  EXPECT_THAT(opened, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(opened.status().message(), HasSubstr("not a Granary data directory"));
  // Untouched: only the file that was there.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(grains)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(RocksDbStorageTest, AnotherFormatIsRefused) {
  RocksDbOptions options;
  options.data_dir = TempDir("format");
  const std::string grains = options.data_dir + "/grains";
  {
    // A RocksDB database with the right families but a different marker.
    rocksdb::Options o;
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, {}}, {"grain_state", {}}, {"reminders", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, grains, families, &handles, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], "granary.format",
                        "granary-grains-99").ok());
    for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  auto opened = RocksDbStorage::Open(options);
  EXPECT_THAT(opened, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(opened.status().message(), HasSubstr("granary-grains-99"));
}

// --- reminder tables ---------------------------------------------------------

absl::Status UpsertNow(ReminderTable& t, const ReminderRow& row) {
  return RunTask(t.Upsert(row));
}

absl::Status RemoveNow(ReminderTable& t, const GrainId& g, const std::string& n) {
  return RunTask(t.Remove(g, n));
}

absl::StatusOr<std::vector<ReminderRow>> ReadAllNow(ReminderTable& t) {
  absl::StatusOr<std::vector<ReminderRow>> out = RunTask(t.ReadAll());
  if (out.ok()) {
    std::sort(out->begin(), out->end(),
              [](const ReminderRow& a, const ReminderRow& b) {
                return std::tie(a.grain.key(), a.name) <
                       std::tie(b.grain.key(), b.name);
              });
  }
  return out;
}

ReminderRow Row(absl::string_view type, std::string key, std::string name,
                int64_t start_s, int64_t period_s) {
  return ReminderRow{GrainId(type, std::move(key)), std::move(name),
                     absl::FromUnixSeconds(start_s), absl::Seconds(period_s)};
}

class ReminderTableTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      table_ = std::make_unique<MemoryReminderTable>();
    } else {
      RocksDbOptions options;
      options.data_dir = TempDir("reminders");
      auto opened = RocksDbStorage::Open(options);
      ASSERT_THAT(opened, IsOk());
      table_ = std::move(*opened);
    }
  }
  std::unique_ptr<ReminderTable> table_;
};

TEST_P(ReminderTableTest, UpsertReplacesRemoveDeletesAndKeysStayApart) {
  ASSERT_THAT(UpsertNow(*table_, Row(kType, "a", "tick", 100, 5)), IsOk());
  ASSERT_THAT(UpsertNow(*table_, Row(kType, "a", "tick", 200, 7)), IsOk());
  // Keys and names that would collide under naive concatenation.
  ASSERT_THAT(
      UpsertNow(*table_, Row(kType, std::string("a\0t", 3), "ick", 1, 1)),
      IsOk());
  ASSERT_THAT(UpsertNow(*table_, Row(kType, "at", "ick", 2, 2)), IsOk());
  ASSERT_THAT(UpsertNow(*table_, Row("test.Other", "a", "tick", 3, 3)), IsOk());
  absl::StatusOr<std::vector<ReminderRow>> rows = ReadAllNow(*table_);
  ASSERT_THAT(rows, IsOk());
  ASSERT_EQ(rows->size(), 4u);
  int found = 0;
  for (const ReminderRow& r : *rows) {
    if (r.grain == GrainId(kType, "a") && r.name == "tick") {
      ++found;
      EXPECT_EQ(r.start, absl::FromUnixSeconds(200));
      EXPECT_EQ(r.period, absl::Seconds(7));
    }
    if (r.grain == GrainId(kType, std::string("a\0t", 3))) {
      EXPECT_EQ(r.name, "ick");
      EXPECT_EQ(r.period, absl::Seconds(1));
    }
    if (r.grain.type() == "test.Other") {
      EXPECT_EQ(r.period, absl::Seconds(3));
    }
  }
  EXPECT_EQ(found, 1);
  ASSERT_THAT(RemoveNow(*table_, GrainId(kType, "a"), "tick"), IsOk());
  ASSERT_THAT(RemoveNow(*table_, GrainId(kType, "a"), "never-there"), IsOk());
  rows = ReadAllNow(*table_);
  ASSERT_THAT(rows, IsOk());
  EXPECT_EQ(rows->size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(Providers, ReminderTableTest,
                         ::testing::Values("memory", "rocksdb"));

TEST(RocksDbStorageTest, RemindersSurviveReopenAndABadRowIsSkipped) {
  RocksDbOptions options;
  options.data_dir = TempDir("reminders-reopen");
  {
    auto s = RocksDbStorage::Open(options);
    ASSERT_THAT(s, IsOk());
    ASSERT_THAT(UpsertNow(**s, Row(kType, "k", "kept", 1700000000, 60)),
                IsOk());
    ASSERT_THAT(UpsertNow(**s, Row(kType, "k", "gone", 1700000000, 60)),
                IsOk());
    ASSERT_THAT(RemoveNow(**s, GrainId(kType, "k"), "gone"), IsOk());
  }
  {
    // Damage: a row whose value has an unknown format, and a malformed key.
    rocksdb::Options o;
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, {}}, {"grain_state", {}}, {"reminders", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, options.data_dir + "/grains", families,
                                  &handles, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[2],
                        ReminderKey(GrainId(kType, "k"), "bad"), "garbage").ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[2], "no-separator",
                        "garbage").ok());
    for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  auto s = RocksDbStorage::Open(options);
  ASSERT_THAT(s, IsOk());
  absl::StatusOr<std::vector<ReminderRow>> rows = ReadAllNow(**s);
  ASSERT_THAT(rows, IsOk());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].name, "kept");
  EXPECT_EQ((*rows)[0].start, absl::FromUnixSeconds(1700000000));
  EXPECT_EQ((*rows)[0].period, absl::Seconds(60));
}

// --- membership table --------------------------------------------------------

v1::Member Silo(const std::string& address, int64_t generation,
                v1::MemberStatus status) {
  v1::Member m;
  m.set_address(address);
  m.set_generation(generation);
  m.set_status(status);
  return m;
}

absl::StatusOr<int64_t> WriteMember(MembershipTable& t, v1::Member m,
                                    int64_t expected) {
  absl::StatusOr<absl::StatusOr<int64_t>> out =
      t.Write(std::move(m), expected).Get();
  if (!out.ok()) return out.status();
  return *out;
}

TEST(MembershipTableTest, EveryChangeIsACompareAndSwapOnTheVersion) {
  InMemoryMembershipTable table;
  EXPECT_EQ(table.Snapshot().version(), 0);
  ASSERT_EQ(*WriteMember(table, Silo("127.0.0.1:1", 5, v1::MEMBER_JOINING), 0), 1);
  ASSERT_EQ(*WriteMember(table, Silo("127.0.0.1:1", 5, v1::MEMBER_ACTIVE), 1), 2);
  // A stale version is refused and changes nothing.
  absl::StatusOr<int64_t> stale =
      WriteMember(table, Silo("127.0.0.1:2", 6, v1::MEMBER_ACTIVE), 1);
  EXPECT_THAT(stale, StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(table.Snapshot().version(), 2);
  EXPECT_EQ(table.Snapshot().members_size(), 1);
  // A new generation on the same address is another member.
  ASSERT_TRUE(WriteMember(table, Silo("127.0.0.1:1", 7, v1::MEMBER_JOINING), 2).ok());
  EXPECT_EQ(table.Snapshot().members_size(), 2);
}

TEST(MembershipTableTest, MalformedRowsAndBackwardsStatusesAreRefused) {
  InMemoryMembershipTable table;
  ASSERT_TRUE(WriteMember(table, Silo("127.0.0.1:1", 5, v1::MEMBER_DEAD), 0).ok());
  for (const v1::Member& bad :
       {Silo("nohostport", 5, v1::MEMBER_ACTIVE), Silo("127.0.0.1:0", 5, v1::MEMBER_ACTIVE),
        Silo("127.0.0.1:1", 0, v1::MEMBER_ACTIVE),
        Silo("127.0.0.1:1", 9, v1::MEMBER_STATUS_UNSPECIFIED),
        Silo("127.0.0.1:1", 9, static_cast<v1::MemberStatus>(42)),
        Silo("127.0.0.1:1", 5, v1::MEMBER_ACTIVE)}) {  // Dead never revives
    absl::StatusOr<int64_t> r = WriteMember(table, bad, 1);
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument))
        << bad.ShortDebugString() << " " << r.status();
  }
  EXPECT_EQ(table.Snapshot().version(), 1);
}

// No member can push the view past the message limit that Read and Watch
// answer within (the attack: rows of one host padded with grain types).
TEST(MembershipTableTest, NoRowFloodCanGrowTheViewPastItsCap) {
  InMemoryMembershipTable table;
  auto padded = [](int port, int64_t generation) {
    v1::Member m = Silo(absl::StrCat("10.0.0.9:", port), generation, v1::MEMBER_JOINING);
    for (int i = 0; m.ByteSizeLong() < kMaxMemberBytes - 300; ++i) {
      m.add_grain_types(absl::StrCat("pad.", i, std::string(200, 'x')));
    }
    return m;
  };
  // A row past its own cap is malformed.
  v1::Member huge = padded(1, 1);
  for (int i = 0; i < 8; ++i) huge.add_grain_types(std::string(200, 'y'));
  EXPECT_THAT(WriteMember(table, huge, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  int64_t version = 0;
  int written = 0;
  absl::Status refused;
  for (int port = 1; port <= 100; ++port) {
    absl::StatusOr<int64_t> v = WriteMember(table, padded(port, port), version);
    if (!v.ok()) {
      refused = v.status();
      break;
    }
    version = *v;
    ++written;
  }
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(refused.message(), HasSubstr("cap"));
  EXPECT_GT(written, 20);
  EXPECT_LE(table.Snapshot().ByteSizeLong(), kMaxViewBytes);
  // A Dead row lists no grain types, and Dead rows make room for new ones.
  v1::Member dead = table.Snapshot().members(0);
  dead.set_status(v1::MEMBER_DEAD);
  ASSERT_TRUE(WriteMember(table, dead, version).ok());
  ++version;
  EXPECT_EQ(table.Snapshot().members(0).grain_types_size(), 0);
  EXPECT_TRUE(WriteMember(table, padded(500, 500), version).ok());
}

TEST(MembershipTableTest, GrainTypesAreSetWhenTheRowIsAddedOnly) {
  InMemoryMembershipTable table;
  v1::Member m = Silo("127.0.0.1:1", 5, v1::MEMBER_JOINING);
  m.add_grain_types("a.A");
  ASSERT_TRUE(WriteMember(table, m, 0).ok());
  m.set_status(v1::MEMBER_ACTIVE);
  ASSERT_TRUE(WriteMember(table, m, 1).ok());  // the same types: fine
  m.add_grain_types("b.B");
  EXPECT_THAT(WriteMember(table, m, 2), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MembershipTableTest, OneHostHoldsABoundedNumberOfLiveRows) {
  InMemoryMembershipTable table;
  int64_t version = 0;
  for (int i = 1; i <= kMaxLiveRowsPerHost; ++i) {
    absl::StatusOr<int64_t> v =
        WriteMember(table, Silo(absl::StrCat("10.1.1.1:", i), i, v1::MEMBER_JOINING), version);
    ASSERT_TRUE(v.ok()) << v.status();
    version = *v;
  }
  absl::StatusOr<int64_t> past = WriteMember(
      table, Silo("10.1.1.1:9999", 9999, v1::MEMBER_JOINING), version);
  EXPECT_THAT(past, StatusIs(absl::StatusCode::kResourceExhausted));
  // Another host is not held back.
  EXPECT_TRUE(WriteMember(table, Silo("10.1.1.2:1", 1, v1::MEMBER_JOINING), version).ok());
}

// Three Active silos with fresh heartbeats on a table judged by `clock`.
class VoteRulesTest : public ::testing::Test {
 protected:
  VoteRulesTest() : table_(VoteRules{2, absl::Seconds(30), absl::Seconds(15), &clock_}) {
    for (int i = 0; i < 3; ++i) {
      v1::Member m = Silo(absl::StrCat("10.0.0.", i + 1, ":11111"), 1, v1::MEMBER_JOINING);
      m.set_heartbeat_unix_ms(NowMs());
      version_ = *WriteMember(table_, m, version_);
      m.set_status(v1::MEMBER_ACTIVE);
      version_ = *WriteMember(table_, m, version_);
    }
  }
  int64_t NowMs() const { return absl::ToUnixMillis(clock_.Now()); }
  v1::Member Row(int i) const { return table_.Snapshot().members(i); }
  static std::string Id(int i) { return absl::StrCat("10.0.0.", i + 1, ":11111@1"); }
  static void AddVote(v1::Member& m, int voter, int64_t at) {
    v1::Suspicion* v = m.add_suspicions();
    v->set_by(Id(voter));
    v->set_at_unix_ms(at);
  }
  absl::Status Write(const v1::Member& m) {
    absl::StatusOr<int64_t> v = WriteMember(table_, m, version_);
    if (v.ok()) version_ = *v;
    return v.status();
  }
  // Silo `i` writes a heartbeat now.
  void Beat(int i) {
    v1::Member m = Row(i);
    m.set_heartbeat_unix_ms(NowMs());
    ASSERT_THAT(Write(m), IsOk());
  }

  FakeClock clock_;
  InMemoryMembershipTable table_;
  int64_t version_ = 0;
};

TEST_F(VoteRulesTest, OneVoteCannotKillWhenTwoLiveMembersCouldVote) {
  v1::Member target = Row(2);
  AddVote(target, 0, NowMs());
  target.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr("with 2 votes from live members, not 1")));
  // Suspecting the other voter does not shrink the number needed either.
  v1::Member other = Row(1);
  AddVote(other, 0, NowMs());
  ASSERT_THAT(Write(other), IsOk());
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  // The vote alone is recorded; the second voter's then kills.
  target = Row(2);
  AddVote(target, 0, NowMs());
  ASSERT_THAT(Write(target), IsOk());
  target = Row(2);
  AddVote(target, 1, NowMs());
  target.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(Write(target), IsOk());
  EXPECT_EQ(Row(2).status(), v1::MEMBER_DEAD);
}

TEST_F(VoteRulesTest, VotesOfTheFutureOfTheDeadOrOfTheTargetAreRefused) {
  v1::Member target = Row(2);
  AddVote(target, 0, NowMs() + absl::ToInt64Milliseconds(kMaxVoteSkew) + 1);
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("dated")));
  target = Row(2);
  AddVote(target, 0, NowMs() - 30'000);  // expired on arrival
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  target = Row(2);
  AddVote(target, 2, NowMs());  // on itself
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  target = Row(2);
  v1::Suspicion* stranger = target.add_suspicions();
  stranger->set_by("10.9.9.9:1@1");  // no such member
  stranger->set_at_unix_ms(NowMs());
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  target = Row(2);
  AddVote(target, 0, NowMs());
  AddVote(target, 0, NowMs() - 1);  // one voter, twice
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("once")));
  // A new row carries no votes.
  v1::Member fresh = Silo("10.0.0.7:1", 1, v1::MEMBER_JOINING);
  AddVote(fresh, 0, NowMs());
  EXPECT_THAT(Write(fresh), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(table_.Snapshot().version(), version_);
}

TEST_F(VoteRulesTest, ACountedVoteStaysUntilItExpires) {
  v1::Member target = Row(2);
  AddVote(target, 0, NowMs());
  ASSERT_THAT(Write(target), IsOk());
  // The suspect (or anyone) cannot wipe it.
  target = Row(2);
  target.clear_suspicions();
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("stays")));
  // Its voter may replace it with a newer vote.
  clock_.Advance(absl::Seconds(1));
  target.clear_suspicions();
  AddVote(target, 0, NowMs());
  EXPECT_THAT(Write(target), IsOk());
  // Once expired, it may go.
  clock_.Advance(absl::Seconds(31));
  target = Row(2);
  target.clear_suspicions();
  EXPECT_THAT(Write(target), IsOk());
}

TEST_F(VoteRulesTest, SilosThatStoppedBeatingDoNotCountAsVoters) {
  // Silos 1 and 2 went silent together: silo 0 alone declares them dead,
  // once their heartbeats are older than the rules allow.
  v1::Member target = Row(2);
  AddVote(target, 0, NowMs());
  target.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(Write(target), StatusIs(absl::StatusCode::kFailedPrecondition));
  clock_.Advance(absl::Seconds(16));
  Beat(0);
  target = Row(2);
  AddVote(target, 0, NowMs());
  target.set_status(v1::MEMBER_DEAD);
  EXPECT_THAT(Write(target), IsOk());
  EXPECT_EQ(VotesNeeded(table_.Snapshot(), Row(1), VoteRules{2, absl::Seconds(30), absl::Seconds(15), &clock_}, NowMs()), 1);
}

TEST_F(VoteRulesTest, DeadRowsArePurgedOnceTheirRetentionHasPassed) {
  InMemoryMembershipTable table(VoteRules{2, absl::Seconds(30), absl::Seconds(15), &clock_},
                                absl::Minutes(5));
  int64_t version = 0;
  v1::Member gone = Silo("10.0.0.1:1", 1, v1::MEMBER_JOINING);
  version = *WriteMember(table, gone, version);
  gone.set_status(v1::MEMBER_DEAD);
  version = *WriteMember(table, gone, version);
  v1::Member live = Silo("10.0.0.2:1", 1, v1::MEMBER_JOINING);
  version = *WriteMember(table, live, version);
  clock_.Advance(absl::Minutes(4));
  live.set_status(v1::MEMBER_ACTIVE);
  version = *WriteMember(table, live, version);
  EXPECT_EQ(table.Snapshot().members_size(), 2);  // not yet
  clock_.Advance(absl::Minutes(2));
  live.set_heartbeat_unix_ms(NowMs());
  ASSERT_TRUE(WriteMember(table, live, version).ok());  // a heartbeat
  ASSERT_EQ(table.Snapshot().members_size(), 1);
  EXPECT_EQ(table.Snapshot().members(0).address(), "10.0.0.2:1");
}

TEST(MembershipTableTest, OfRacingWritersExactlyOneWinsEachVersion) {
  InMemoryMembershipTable table;
  std::vector<int64_t> seen;
  Mutex seen_mu;
  const int id = table.Subscribe([&](const v1::MembershipView& v) {
    MutexLock lock(&seen_mu);
    seen.push_back(v.version());
  });
  constexpr int kWriters = 8, kRounds = 50;
  std::vector<int> wins(kWriters, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int r = 0; r < kRounds; ++r) {
        // Everyone races for the version they read.
        const int64_t version = table.Snapshot().version();
        v1::Member m = Silo(absl::StrCat("127.0.0.1:", 1000 + w), 1,
                            v1::MEMBER_JOINING);
        m.set_heartbeat_unix_ms(r + 1);
        absl::StatusOr<int64_t> got = WriteMember(table, m, version);
        if (got.ok()) {
          EXPECT_EQ(*got, version + 1);
          ++wins[w];
        } else {
          EXPECT_THAT(got, StatusIs(absl::StatusCode::kAborted));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  table.Unsubscribe(id);
  int total = 0;
  for (int w : wins) total += w;
  // One winner per version: the version counts the successful writes.
  EXPECT_EQ(table.Snapshot().version(), total);
  MutexLock lock(&seen_mu);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(static_cast<int>(seen.size()), total);
  for (int i = 0; i < static_cast<int>(seen.size()); ++i) EXPECT_EQ(seen[i], i + 1);
}

TEST(RocksDbStorageTest, NoDataDirectoryIsInvalidArgument) {
  EXPECT_THAT(RocksDbStorage::Open(RocksDbOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace granary::storage
