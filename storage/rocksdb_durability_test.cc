// RocksDbStorage's durability, observed at the file system: under
// Durability::kSync (--durability=sync, the default) every acknowledged
// state write and reminder change has synced the write-ahead log before it
// returns; under kAsync none does. A store that skipped the sync would pass
// every other test, since nothing else can tell a synced write from one in
// the page cache.
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/testing/run_task.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "storage/rocksdb_storage.h"
#include "storage/storage_test_util.h"

using ::granary::matchers::IsOk;

namespace granary::storage {
namespace {

// A file system that counts the syncs of write-ahead log files (*.log):
// Sync, Fsync and RangeSync all make written bytes durable.
class SyncCountingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  SyncCountingFileSystem()
      : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "SyncCountingFileSystem"; }

  int64_t wal_syncs() const { return wal_syncs_.load(); }

  rocksdb::IOStatus NewWritableFile(
      const std::string& name, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* file,
      rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewWritableFile(name, options, file, dbg);
    if (s.ok() && absl::EndsWith(name, ".log")) {
      *file = std::make_unique<File>(std::move(*file), &wal_syncs_);
    }
    return s;
  }
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& name, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* file,
      rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s =
        target()->ReopenWritableFile(name, options, file, dbg);
    if (s.ok() && absl::EndsWith(name, ".log")) {
      *file = std::make_unique<File>(std::move(*file), &wal_syncs_);
    }
    return s;
  }

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> f,
         std::atomic<int64_t>* syncs)
        : FSWritableFileOwnerWrapper(std::move(f)), syncs_(syncs) {}
    rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
      syncs_->fetch_add(1);
      return FSWritableFileOwnerWrapper::Sync(options, dbg);
    }
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                            rocksdb::IODebugContext* dbg) override {
      syncs_->fetch_add(1);
      return FSWritableFileOwnerWrapper::Fsync(options, dbg);
    }
    rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes,
                                const rocksdb::IOOptions& options,
                                rocksdb::IODebugContext* dbg) override {
      syncs_->fetch_add(1);
      return FSWritableFileOwnerWrapper::RangeSync(offset, nbytes, options,
                                                   dbg);
    }

   private:
    std::atomic<int64_t>* const syncs_;
  };

  std::atomic<int64_t> wal_syncs_{0};
};

// The write-ahead log syncs that `writes` acknowledged state writes and
// `writes` reminder upserts cost, one after another, on a store opened with
// `durability`.
int64_t SyncsFor(Durability durability, const std::string& name, int writes) {
  auto fs = std::make_shared<SyncCountingFileSystem>();
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  RocksDbOptions options;
  options.data_dir = TempDir(name);
  options.env = env.get();
  options.durability = durability;
  auto opened = RocksDbStorage::Open(options);
  EXPECT_THAT(opened, IsOk());
  if (!opened.ok()) return -1;
  RocksDbStorage& store = **opened;
  const int64_t before = fs->wal_syncs();
  std::string etag;
  for (int i = 0; i < writes; ++i) {
    absl::StatusOr<std::string> written =
        WriteNow(store, GrainId(kType, "a"), absl::StrCat("v", i), etag);
    EXPECT_THAT(written, IsOk());
    if (written.ok()) etag = *written;
    ReminderRow row{GrainId(kType, "a"), absl::StrCat("r", i), absl::Now(),
                    absl::Minutes(1)};
    EXPECT_THAT(RunTask(store.Upsert(row)), IsOk());
  }
  // Counted before the store closes (a close may sync by itself).
  return fs->wal_syncs() - before;
}

TEST(RocksDbDurabilityTest, EverySyncWriteSyncsTheLogBeforeItIsAcknowledged) {
  constexpr int kWrites = 20;
  // One at a time, so no two share a group commit: one sync for each state
  // write and each reminder upsert at least.
  EXPECT_GE(SyncsFor(Durability::kSync, "sync", kWrites), 2 * kWrites);
}

TEST(RocksDbDurabilityTest, AsyncWritesLeaveTheLogUnsynced) {
  EXPECT_EQ(SyncsFor(Durability::kAsync, "async", 20), 0);
}

}  // namespace
}  // namespace granary::storage
