// RocksDbStorage under trouble: a full disk (an injected file system that
// fails writes with "no space" on demand) and a write queue at its bound.
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/detach.h"
#include "core/testing/run_task.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "storage/rocksdb_storage.h"
#include "storage/storage_test_util.h"

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;

namespace granary::storage {
namespace {

using ::testing::HasSubstr;

// A file system whose writes fail with "no space" while `full` is set, as a
// full disk's do.
class FullDiskFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit FullDiskFileSystem(std::atomic<bool>* full)
      : FileSystemWrapper(rocksdb::FileSystem::Default()), full_(full) {}
  const char* Name() const override { return "FullDiskFileSystem"; }

  rocksdb::IOStatus GetFreeSpace(const std::string& path,
                                 const rocksdb::IOOptions& options,
                                 uint64_t* free,
                                 rocksdb::IODebugContext* dbg) override {
    if (full_->load()) {
      *free = 0;
      return rocksdb::IOStatus::OK();
    }
    return target()->GetFreeSpace(path, options, free, dbg);
  }

  rocksdb::IOStatus NewWritableFile(
      const std::string& name, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* file,
      rocksdb::IODebugContext* dbg) override {
    if (full_->load()) return rocksdb::IOStatus::NoSpace("disk full (test)");
    rocksdb::IOStatus s = target()->NewWritableFile(name, options, file, dbg);
    if (s.ok()) *file = std::make_unique<File>(std::move(*file), full_);
    return s;
  }

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> f, std::atomic<bool>* full)
        : FSWritableFileOwnerWrapper(std::move(f)), full_(full) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
      if (full_->load()) return rocksdb::IOStatus::NoSpace("disk full (test)");
      return FSWritableFileOwnerWrapper::Append(data, options, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data,
                             const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo& info,
                             rocksdb::IODebugContext* dbg) override {
      if (full_->load()) return rocksdb::IOStatus::NoSpace("disk full (test)");
      return FSWritableFileOwnerWrapper::Append(data, options, info, dbg);
    }

   private:
    std::atomic<bool>* const full_;
  };

  std::atomic<bool>* const full_;
};

// A full disk: writes fail UNAVAILABLE with the reason and Health() says so,
// reads go on; once space returns the store resumes by itself, and what was
// acknowledged is there after a reopen, what failed is not.
TEST(RocksDbStorageTest, AFullDiskFailsWritesUntilSpaceReturns) {
  std::atomic<bool> full{false};
  auto fs = std::make_shared<FullDiskFileSystem>(&full);
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  RocksDbOptions options;
  options.data_dir = TempDir("full-disk");
  options.env = env.get();
  options.resume_period = absl::Milliseconds(20);
  const GrainId a(kType, "a"), b(kType, "b");
  std::string etag_a;
  {
    auto s = RocksDbStorage::Open(options);
    ASSERT_THAT(s, IsOk());
    RocksDbStorage& store = **s;
    absl::StatusOr<std::string> e = WriteNow(store, a, "a1", "");
    ASSERT_THAT(e, IsOk());
    EXPECT_THAT(store.Health(), IsOk());

    full = true;
    absl::StatusOr<std::string> failed = WriteNow(store, a, "a2", *e);
    EXPECT_THAT(failed, StatusIs(absl::StatusCode::kUnavailable,
                                 HasSubstr("storage cannot write")));
    EXPECT_THAT(store.Health(), StatusIs(absl::StatusCode::kUnavailable,
                                         HasSubstr("the data disk is full")));
    EXPECT_GE(store.WriteErrors(), 1);
    // Every write fails with the reason while the disk stays full, reminders
    // too; reads go on.
    EXPECT_THAT(WriteNow(store, b, "b1", ""),
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr("storage cannot write")));
    ReminderRow row{b, std::string("r"), absl::Now(), absl::Minutes(1)};
    EXPECT_THAT(RunTask(store.Upsert(row)),
                StatusIs(absl::StatusCode::kUnavailable));
    absl::StatusOr<StoredState> read = ReadNow(store, a);
    ASSERT_THAT(read, IsOk());
    EXPECT_EQ(read->bytes, "a1");
    absl::SleepFor(absl::Milliseconds(100));  // resumes fail meanwhile
    EXPECT_FALSE(store.Health().ok());

    full = false;
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (!store.Health().ok() && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_THAT(store.Health(), IsOk());
    absl::StatusOr<std::string> again = WriteNow(store, a, "a3", *e);
    ASSERT_THAT(again, IsOk());
    etag_a = *again;
  }
  auto s = RocksDbStorage::Open(options);
  ASSERT_THAT(s, IsOk());
  absl::StatusOr<StoredState> read = ReadNow(**s, a);
  ASSERT_THAT(read, IsOk());
  EXPECT_EQ(read->bytes, "a3");
  EXPECT_EQ(read->etag, etag_a);
  absl::StatusOr<StoredState> never = ReadNow(**s, b);
  ASSERT_THAT(never, IsOk());
  EXPECT_FALSE(never->exists);
}

// Past max_queued waiting writes, a write fails RESOURCE_EXHAUSTED at once.
TEST(RocksDbStorageTest, TheWriteQueueIsBounded) {
  RocksDbOptions options;
  options.data_dir = TempDir("bounded");
  options.max_queued = 4;
  auto s = RocksDbStorage::Open(options);
  ASSERT_THAT(s, IsOk());
  // Start many writes without awaiting them: the writer thread takes a
  // group at a time, so some find the queue full.
  std::atomic<int> exhausted{0}, written{0}, done{0};
  constexpr int kWrites = 2000;
  for (int i = 0; i < kWrites; ++i) {
    DetachFlat((*s)->Write(GrainId(kType, absl::StrCat("q", i)), "v", ""),
               [&](absl::StatusOr<std::string> r) {
                 if (r.ok()) {
                   written.fetch_add(1);
                 } else if (r.status().code() ==
                            absl::StatusCode::kResourceExhausted) {
                   exhausted.fetch_add(1);
                 }
                 done.fetch_add(1);
               });
  }
  const absl::Time until = absl::Now() + absl::Seconds(60);
  while (done.load() < kWrites && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(done.load(), kWrites);
  EXPECT_GT(exhausted.load(), 0);
  EXPECT_EQ(written.load() + exhausted.load(), kWrites);
}

}  // namespace
}  // namespace granary::storage
