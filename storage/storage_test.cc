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
    absl::StatusOr<std::string> e =
        WriteNow(**s, GrainId(kType, "k"), "kept", "");
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
  absl::StatusOr<std::string> next =
      WriteNow(**s, GrainId(kType, "k"), "more", etag);
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
  EXPECT_THAT(second.status().message(),
              HasSubstr("in use by another process"));
}

TEST(RocksDbStorageTest, AForeignDirectoryIsRefusedAndLeftUntouched) {
  RocksDbOptions options;
  options.data_dir = TempDir("foreign");
  const std::string grains = options.data_dir + "/grains";
  std::filesystem::create_directories(grains);
  { std::ofstream(grains + "/notes.txt") << "mine"; }
  auto opened = RocksDbStorage::Open(options);
  EXPECT_THAT(opened, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(opened.status().message(),
              HasSubstr("not a Granary data directory"));
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
        {rocksdb::kDefaultColumnFamilyName, {}},
        {"grain_state", {}},
        {"reminders", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, grains, families, &handles, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[0], "granary.format",
                        "granary-grains-99")
                    .ok());
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

absl::Status RemoveNow(ReminderTable& t, const GrainId& g,
                       const std::string& n) {
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
        {rocksdb::kDefaultColumnFamilyName, {}},
        {"grain_state", {}},
        {"reminders", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, options.data_dir + "/grains", families,
                                  &handles, &db)
                    .ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[2],
                        ReminderKey(GrainId(kType, "k"), "bad"), "garbage")
                    .ok());
    ASSERT_TRUE(
        db->Put(rocksdb::WriteOptions(), handles[2], "no-separator", "garbage")
            .ok());
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

TEST(RocksDbStorageTest, NoDataDirectoryIsInvalidArgument) {
  EXPECT_THAT(RocksDbStorage::Open(RocksDbOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace granary::storage
