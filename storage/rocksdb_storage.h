// File: storage/rocksdb_storage.h
// -----------------------------------------------------------------------------
// GrainStorage on an embedded RocksDB in the silo's data directory: the
// default, so a single silo needs no database server.
//
//   RocksDbOptions options;
//   options.data_dir = "./granary-data";
//   absl::StatusOr<std::unique_ptr<RocksDbStorage>> storage =
//       RocksDbStorage::Open(options);
//
// On disk: `<data_dir>/grains`, a RocksDB database with column families
// `grain_state` and `reminders`, and a format marker in the default family
// that Open checks. Grain state keys are `<grain type> \0 <key>`: type names
// never hold a NUL, so ids of different types cannot collide. Values are an
// 8-byte version (the etag) followed by the state bytes. Reminder keys are
// `<grain type> \0 <4-byte big-endian key length> <key> <name>`; values a
// format byte (1), then the first tick and the period in microseconds
// (8 bytes each, little-endian).
//
// Writes (state and reminders) go to one writer thread that group-commits:
// every write queued while the previous group was being made durable goes into
// the next RocksDB write batch, checked against its expected etag in order,
// then synced once (durability kSync: an acknowledged write survives power
// loss; kAsync: the write-ahead log is not synced, so it survives a crash of
// the process but not of the machine). A write's task finishes only after its
// group was written (and, with kSync, synced): the writer thread then
// resumes each awaiting coroutine of the group in order, so what follows
// the `co_await` runs on that thread and must not block. Reads run on a
// reader thread, never on the caller's, and resume their awaiter there.
//
// Bounds: at most `max_queued` writes and as many reads wait for their
// thread; past that a call fails RESOURCE_EXHAUSTED at once.
//
// Health: when RocksDB cannot write (a full disk: its background error, or a
// failed write), Health() turns UNAVAILABLE with the reason, the silo's
// /readyz answers 503, and every write fails UNAVAILABLE with that reason
// (nothing is acknowledged that was not made durable; reads go on). The
// writer thread calls DB::Resume() once a second, as soon as the disk has
// `resume_free_bytes` free, until it succeeds; then the store is healthy
// again.
//
// Lifecycle: Open -> serving -> destructor (stops both threads after their
// queues drain, closes the database).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/grain_storage.h"
#include "storage/reminder_table.h"

namespace rocksdb {
class Env;
}

namespace granary::storage {

enum class Durability { kSync, kAsync };

struct RocksDbOptions {
  // The silo's data directory; the database lives in `<data_dir>/grains`.
  std::string data_dir;
  Durability durability = Durability::kSync;
  // Writes (and, separately, reads) that may wait for their thread.
  int max_queued = 1 << 16;
  // How often a store that cannot write tries DB::Resume(), once the disk
  // has this much room (a resume flushes the memtables; one that fails for
  // want of space leaves RocksDB unable to resume until reopened).
  absl::Duration resume_period = absl::Seconds(1);
  uint64_t resume_free_bytes = 64 << 20;
  // The environment RocksDB works in; null is the default (the local disk).
  // Tests pass one that fails writes on demand.
  rocksdb::Env* env = nullptr;
};

class RocksDbStorage final : public GrainStorage, public ReminderTable {
 public:
  // FAILED_PRECONDITION when another process holds the directory, or it is
  // not a Granary data directory or has another format version (it is then
  // left untouched); DATA_LOSS when RocksDB reports corruption.
  static absl::StatusOr<std::unique_ptr<RocksDbStorage>> Open(
      const RocksDbOptions& options);

  ~RocksDbStorage() override;

  // GrainStorage. Each task suspends until the reader or writer thread
  // completes it, and resumes there (core/completion.h).
  Task<absl::StatusOr<StoredState>> Read(GrainId id) override;
  Task<absl::StatusOr<std::string>> Write(GrainId id, std::string bytes,
                                          std::string expected_etag) override;
  Task<absl::StatusOr<std::string>> Clear(GrainId id,
                                          std::string expected_etag) override;

  // ReminderTable.
  Task<absl::Status> Upsert(ReminderRow row) override;
  Task<absl::Status> Remove(GrainId grain, std::string name) override;
  Task<absl::StatusOr<std::vector<ReminderRow>>> ReadAll() override;

  absl::Status Health() override;
  int64_t WriteErrors() override;

  // The on-disk format this build reads and writes.
  static constexpr char kFormat[] = "granary-grains-1";

  class Impl;

 private:
  explicit RocksDbStorage(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The key of a grain's state: `<type> \0 <key>`.
std::string StateKey(const GrainId& id);
// The key of a reminder row (see above).
std::string ReminderKey(const GrainId& grain, absl::string_view name);

}  // namespace granary::storage
