#include "storage/rocksdb_storage.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/completion.h"
#include "core/log.h"
#include "core/status.h"
#include "core/sync.h"
#include "core/thread_top.h"
#include "rocksdb/db.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"
#include "storage/rocksdb_codec.h"
#include "storage/rocksdb_logger.h"

namespace granary::storage {
namespace {

using rocksdb_codec::DecodeReminder;
using rocksdb_codec::DecodeState;
using rocksdb_codec::DecodeVersion;
using rocksdb_codec::EncodeReminder;
using rocksdb_codec::EncodeValue;
using rocksdb_codec::Etag;

constexpr char kStateFamily[] = "grain_state";
constexpr char kRemindersFamily[] = "reminders";
constexpr char kFormatKey[] = "granary.format";

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsCorruption()) {
    return absl::DataLossError(absl::StrCat(what, ": ", s.ToString()));
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", s.ToString()));
}

}  // namespace

class RocksDbStorage::Impl {
 public:
  struct PendingWrite {
    enum class Op { kWrite, kClear, kReminderPut, kReminderRemove };
    Op op = Op::kWrite;
    GrainId id;
    std::string reminder_key;  // reminder operations
    std::string bytes;
    std::string expected_etag;
    // Completed by the writer thread once the group is durable: the new
    // etag of a kWrite, the status of any other operation.
    Completion<absl::StatusOr<std::string>>* write_done = nullptr;
    Completion<absl::Status>* status_done = nullptr;
  };
  using ReadDone = Completion<absl::StatusOr<StoredState>>;
  using ReadAllDone = Completion<absl::StatusOr<std::vector<ReminderRow>>>;

  ~Impl() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
      cv_.SignalAll();
    }
    if (writer_.joinable()) writer_.join();
    if (reader_.joinable()) reader_.join();
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      (void)db_->DestroyColumnFamilyHandle(h);
    }
    handles_.clear();
    if (db_ != nullptr) (void)db_->Close();
  }

  absl::Status Open(const RocksDbOptions& options) {
    namespace fs = std::filesystem;
    path_ = (fs::path(options.data_dir) / "grains").string();
    sync_ = options.durability == Durability::kSync;
    max_queued_ = static_cast<size_t>(std::max(1, options.max_queued));
    resume_period_ = options.resume_period;
    std::error_code ec;
    const bool exists = fs::exists(path_, ec);
    const bool fresh = !exists || fs::is_empty(path_, ec);
    if (!fresh && !fs::exists(fs::path(path_) / "CURRENT", ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", path_,
                       "' is not empty and is not a Granary data directory "
                       "(no RocksDB database in it); refusing to touch it"));
    }
    if (fresh) {
      fs::create_directories(path_, ec);
      if (ec) {
        return absl::UnavailableError(
            absl::StrCat("cannot create '", path_, "': ", ec.message()));
      }
    }
    rocksdb::Options db_options;
    db_options.create_if_missing = fresh;
    db_options.create_missing_column_families = fresh;
    db_options.error_if_exists = false;
    db_options.paranoid_checks = true;
    if (options.env != nullptr) db_options.env = options.env;
    env_ = db_options.env;
    resume_free_bytes_ = options.resume_free_bytes;
    db_options.listeners.push_back(std::make_shared<Listener>(this));
    db_options.info_log = NewRocksDbLogger();
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
        {kStateFamily, rocksdb::ColumnFamilyOptions()},
        {kRemindersFamily, rocksdb::ColumnFamilyOptions()},
    };
    if (!fresh) {
      std::vector<std::string> present;
      rocksdb::Status listed =
          rocksdb::DB::ListColumnFamilies(db_options, path_, &present);
      if (!listed.ok()) return OpenError(listed);
      for (const char* want : {kStateFamily, kRemindersFamily}) {
        if (std::find(present.begin(), present.end(), want) == present.end()) {
          return absl::FailedPreconditionError(
              absl::StrCat("'", path_,
                           "' is a RocksDB database but not a Granary data "
                           "directory (no column family '",
                           want,
                           "'); refusing to touch "
                           "it"));
        }
      }
    }
    rocksdb::DB* db = nullptr;
    rocksdb::Status opened =
        rocksdb::DB::Open(db_options, path_, families, &handles_, &db);
    if (!opened.ok()) return OpenError(opened);
    db_.reset(db);
    state_ = handles_[1];
    reminders_ = handles_[2];

    std::string format;
    rocksdb::Status got =
        db_->Get(rocksdb::ReadOptions(), handles_[0], kFormatKey, &format);
    if (got.IsNotFound() && fresh) {
      rocksdb::WriteOptions write;
      write.sync = true;
      GRANARY_RETURN_IF_ERROR(
          FromRocks(db_->Put(write, handles_[0], kFormatKey, kFormat),
                    "writing the format marker"));
    } else if (got.IsNotFound()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", path_, "' has no Granary format marker; refusing to touch it"));
    } else if (!got.ok()) {
      return FromRocks(got, "reading the format marker");
    } else if (format != kFormat) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", path_, "' holds format '", format, "' but this build reads '",
          kFormat, "'; refusing to touch it"));
    }
    writer_ = std::thread(
        [this] { RunThreadTop("rocksdb_writer", [this] { WriterLoop(); }); });
    reader_ = std::thread(
        [this] { RunThreadTop("rocksdb_reader", [this] { ReaderLoop(); }); });
    GRANARY_LOG(kInfo) << "path=" << LogQuote(path_)
                       << " durability=" << (sync_ ? "sync" : "async")
                       << " storage: RocksDB opened";
    return absl::OkStatus();
  }

  // Each queues its work, or says why not (RESOURCE_EXHAUSTED: the queue is
  // full); then `done` is never completed.
  absl::Status Read(GrainId id, ReadDone* done) {
    MutexLock lock(&mu_);
    GRANARY_RETURN_IF_ERROR(Room(reads_.size(), "reads"));
    reads_.push_back(PendingRead{std::move(id), done, nullptr});
    cv_.SignalAll();
    return absl::OkStatus();
  }

  absl::Status ReadAllReminders(ReadAllDone* done) {
    MutexLock lock(&mu_);
    GRANARY_RETURN_IF_ERROR(Room(reads_.size(), "reads"));
    reads_.push_back(PendingRead{GrainId(), nullptr, done});
    cv_.SignalAll();
    return absl::OkStatus();
  }

  absl::Status Write(PendingWrite w) {
    MutexLock lock(&mu_);
    GRANARY_RETURN_IF_ERROR(Room(writes_.size(), "writes"));
    writes_.push_back(std::move(w));
    cv_.SignalAll();
    return absl::OkStatus();
  }

  absl::Status Health() {
    MutexLock lock(&health_mu_);
    return health_;
  }
  int64_t WriteErrors() { return write_errors_.load(); }

 private:
  // Tells the store of RocksDB's background errors and recoveries. Called
  // on RocksDB's threads, maybe under its own mutex: it only records.
  class Listener : public rocksdb::EventListener {
   public:
    explicit Listener(Impl* impl) : impl_(impl) {}
    void OnBackgroundError(rocksdb::BackgroundErrorReason,
                           rocksdb::Status* error) override {
      if (error != nullptr && !error->ok()) {
        impl_->MarkUnhealthy(*error);
      }
    }
    void OnErrorRecoveryEnd(
        const rocksdb::BackgroundErrorRecoveryInfo& info) override {
      if (info.new_bg_error.ok()) impl_->MarkHealthy("RocksDB recovered");
    }

   private:
    Impl* const impl_;
  };

  absl::Status Room(size_t queued, absl::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (queued < max_queued_) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(
        "storage: ", queued, " ", what, " already wait for RocksDB"));
  }

  // Callers see the kind of failure; the log has RocksDB's whole message
  // (file names and all).
  void MarkUnhealthy(const rocksdb::Status& error) {
    write_errors_.fetch_add(1);
    MutexLock lock(&health_mu_);
    if (!health_.ok()) return;
    health_ = absl::UnavailableError(
        absl::StrCat("storage cannot write: ",
                     error.IsNoSpace() ? "the data disk is full"
                                       : "the data disk failed a write",
                     " (details in the silo's log)"));
    GRANARY_LOG(kError) << "path=" << LogQuote(path_)
                        << " storage: writes fail until RocksDB recovers: "
                        << error.ToString();
  }

  void MarkHealthy(absl::string_view how) {
    MutexLock lock(&health_mu_);
    if (health_.ok()) return;
    health_ = absl::OkStatus();
    GRANARY_LOG(kInfo) << "path=" << LogQuote(path_) << " storage: " << how
                       << "; writes are taken again";
  }

  // While the store cannot write: DB::Resume() at most once a period.
  // False while it still cannot.
  bool TryResume() {
    if (Health().ok()) return true;
    const absl::Time now = absl::Now();
    if (now < next_resume_) return false;
    next_resume_ = now + resume_period_;
    // Resuming flushes the memtables: tried on a disk still full, that
    // fails too, and RocksDB then gives up for good (a fatal error that
    // only a reopen clears). So first wait for the room a flush needs.
    uint64_t free_bytes = 0;
    const rocksdb::Status space = env_->GetFreeSpace(path_, &free_bytes);
    if (space.ok() && free_bytes < resume_free_bytes_) {
      GRANARY_LOG_EVERY(kWarning, absl::Seconds(10))
          << "path=" << LogQuote(path_) << " free_bytes=" << free_bytes
          << " storage: waiting for " << resume_free_bytes_
          << " free bytes before RocksDB resumes";
      return false;
    }
    rocksdb::Status resumed = db_->Resume();
    if (!resumed.ok()) {
      if (resumed.IsBusy()) return false;  // RocksDB recovers by itself
      GRANARY_LOG_EVERY(kWarning, absl::Seconds(10))
          << "path=" << LogQuote(path_)
          << " storage: RocksDB cannot resume yet: " << resumed.ToString();
      return false;
    }
    MarkHealthy("RocksDB resumed");
    return true;
  }

  struct PendingRead {
    GrainId id;
    ReadDone* done;
    ReadAllDone* all_reminders;  // set instead of `done` for ReadAll
  };

  absl::Status OpenError(const rocksdb::Status& s) {
    if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
      return absl::FailedPreconditionError(
          absl::StrCat("data directory '", path_,
                       "' is in use by another process (", s.ToString(), ")"));
    }
    return FromRocks(s, absl::StrCat("opening '", path_, "'"));
  }

  void ReaderLoop() {
    while (true) {
      std::deque<PendingRead> batch;
      {
        MutexLock lock(&mu_);
        while (reads_.empty() && !stopping_) cv_.Wait(&mu_);
        if (reads_.empty()) return;
        batch.swap(reads_);
      }
      for (PendingRead& r : batch) {
        if (r.all_reminders != nullptr) {
          r.all_reminders->Complete(ScanReminders());
        } else {
          r.done->Complete(ReadState(r.id));
        }
      }
    }
  }

  absl::StatusOr<StoredState> ReadState(const GrainId& id) {
    std::string value;
    rocksdb::Status s =
        db_->Get(rocksdb::ReadOptions(), state_, StateKey(id), &value);
    if (s.IsNotFound()) return StoredState{};
    if (!s.ok()) return FromRocks(s, absl::StrCat("reading ", id.ToString()));
    return DecodeState(id, value);
  }

  absl::StatusOr<std::vector<ReminderRow>> ScanReminders() {
    std::vector<ReminderRow> rows;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), reminders_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      absl::StatusOr<ReminderRow> row = DecodeReminder(
          absl::string_view(it->key().data(), it->key().size()),
          absl::string_view(it->value().data(), it->value().size()));
      if (!row.ok()) {
        GRANARY_LOG(kError)
            << "storage: skipping a reminder row: " << row.status();
        continue;
      }
      rows.push_back(*std::move(row));
    }
    GRANARY_RETURN_IF_ERROR(FromRocks(it->status(), "reading reminders"));
    return rows;
  }

  // One group per iteration: check every queued write's etag in order
  // against the store and the writes before it in the group, commit the
  // survivors in one synced batch, then complete them all.
  void WriterLoop() {
    while (true) {
      std::deque<PendingWrite> group;
      {
        MutexLock lock(&mu_);
        while (writes_.empty() && !stopping_) {
          if (Health().ok()) {
            cv_.Wait(&mu_);
          } else {
            cv_.WaitWithDeadline(&mu_, absl::Now() + resume_period_);
            if (!writes_.empty() || stopping_) break;
            mu_.Unlock();
            TryResume();
            mu_.Lock();
          }
        }
        if (writes_.empty()) return;
        group.swap(writes_);
      }
      if (!TryResume()) {
        // Nothing of the group is written: each fails with the reason.
        const absl::Status down = Health();
        CompleteGroup(
            group, std::vector<absl::Status>(group.size()),
            std::vector<uint64_t>(group.size(), 0),
            down.ok() ? absl::UnavailableError("storage cannot write") : down);
        continue;
      }
      rocksdb::WriteBatch batch;
      // Versions as of the writes earlier in this group (0 = absent).
      absl::flat_hash_map<std::string, uint64_t> pending;
      std::vector<absl::Status> outcome(group.size());
      std::vector<uint64_t> versions(group.size(), 0);
      for (size_t i = 0; i < group.size(); ++i) {
        PendingWrite& w = group[i];
        if (w.op == PendingWrite::Op::kReminderPut) {
          batch.Put(reminders_, w.reminder_key, w.bytes);
          continue;
        }
        if (w.op == PendingWrite::Op::kReminderRemove) {
          batch.Delete(reminders_, w.reminder_key);
          continue;
        }
        const std::string key = StateKey(w.id);
        uint64_t current = 0;
        if (auto it = pending.find(key); it != pending.end()) {
          current = it->second;
        } else {
          std::string value;
          rocksdb::Status s =
              db_->Get(rocksdb::ReadOptions(), state_, key, &value);
          if (!s.ok() && !s.IsNotFound()) {
            outcome[i] =
                FromRocks(s, absl::StrCat("reading ", w.id.ToString()));
            continue;
          }
          current = s.ok() ? DecodeVersion(value) : 0;
          last_version_ = std::max(last_version_, current);
        }
        if (Etag(current) != w.expected_etag) {
          outcome[i] = StaleEtagError(w.id, w.expected_etag, Etag(current));
          continue;
        }
        if (w.op == PendingWrite::Op::kClear) {
          batch.Delete(state_, key);
          pending[key] = 0;
        } else {
          // Versions only grow, also across a clear: the next version is
          // one past the highest this store handed out.
          const uint64_t next = ++last_version_;
          batch.Put(state_, key, EncodeValue(next, w.bytes));
          pending[key] = next;
          versions[i] = next;
        }
      }
      rocksdb::WriteOptions write;
      write.sync = sync_;
      absl::Status committed = absl::OkStatus();
      if (batch.Count() > 0) {
        const rocksdb::Status s = db_->Write(write, &batch);
        if (!s.ok() && !s.IsCorruption()) {
          MarkUnhealthy(s);
          next_resume_ = absl::Now() + resume_period_;
          const absl::Status down = Health();
          committed = down.ok() ? FromRocks(s, "writing grain state") : down;
        } else {
          committed = FromRocks(s, "writing grain state");
        }
      }
      CompleteGroup(group, outcome, versions, committed);
    }
  }

  // Acknowledges a group once its batch is durable (or failed): resumes
  // each writer's coroutine, in order, on this thread.
  static void CompleteGroup(std::deque<PendingWrite>& group,
                            const std::vector<absl::Status>& outcome,
                            const std::vector<uint64_t>& versions,
                            const absl::Status& committed) {
    for (size_t i = 0; i < group.size(); ++i) {
      absl::Status s = outcome[i].ok() ? committed : outcome[i];
      PendingWrite& w = group[i];
      if (w.op != PendingWrite::Op::kWrite) {
        w.status_done->Complete(std::move(s));
      } else if (!s.ok()) {
        w.write_done->Complete(std::move(s));
      } else {
        w.write_done->Complete(Etag(versions[i]));
      }
    }
  }

  std::string path_;
  bool sync_ = true;
  size_t max_queued_ = 1 << 16;
  absl::Duration resume_period_ = absl::Seconds(1);
  absl::Time next_resume_ = absl::InfinitePast();  // the writer thread's
  rocksdb::Env* env_ = nullptr;
  uint64_t resume_free_bytes_ = 0;

  Mutex health_mu_;
  absl::Status health_ ABSL_GUARDED_BY(health_mu_);
  std::atomic<int64_t> write_errors_{0};
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  rocksdb::ColumnFamilyHandle* state_ = nullptr;
  rocksdb::ColumnFamilyHandle* reminders_ = nullptr;
  // Seeded from the clock so versions keep growing across restarts without
  // a stored counter; bumped past any stored version it meets.
  uint64_t last_version_ =
      static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));

  Mutex mu_;
  CondVar cv_;
  std::deque<PendingRead> reads_ ABSL_GUARDED_BY(mu_);
  std::deque<PendingWrite> writes_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread writer_;
  std::thread reader_;
};

absl::StatusOr<std::unique_ptr<RocksDbStorage>> RocksDbStorage::Open(
    const RocksDbOptions& options) {
  if (options.data_dir.empty()) {
    return absl::InvalidArgumentError("RocksDB storage needs a data directory");
  }
  auto impl = std::make_unique<Impl>();
  GRANARY_RETURN_IF_ERROR(impl->Open(options));
  return std::unique_ptr<RocksDbStorage>(new RocksDbStorage(std::move(impl)));
}

RocksDbStorage::RocksDbStorage(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

RocksDbStorage::~RocksDbStorage() = default;

Task<absl::StatusOr<StoredState>> RocksDbStorage::Read(GrainId id) {
  Impl::ReadDone done;
  if (absl::Status queued = impl_->Read(std::move(id), &done); !queued.ok()) {
    co_return queued;
  }
  co_return co_await done;
}

Task<absl::StatusOr<std::string>> RocksDbStorage::Write(
    GrainId id, std::string bytes, std::string expected_etag) {
  Completion<absl::StatusOr<std::string>> done;
  Impl::PendingWrite w;
  w.id = std::move(id);
  w.bytes = std::move(bytes);
  w.expected_etag = std::move(expected_etag);
  w.write_done = &done;
  if (absl::Status queued = impl_->Write(std::move(w)); !queued.ok()) {
    co_return queued;
  }
  co_return co_await done;
}

Task<absl::StatusOr<std::string>> RocksDbStorage::Clear(
    GrainId id, std::string expected_etag) {
  Completion<absl::Status> done;
  Impl::PendingWrite w;
  w.id = std::move(id);
  w.op = Impl::PendingWrite::Op::kClear;
  w.expected_etag = std::move(expected_etag);
  w.status_done = &done;
  if (absl::Status queued = impl_->Write(std::move(w)); !queued.ok()) {
    co_return queued;
  }
  absl::Status cleared = co_await done;
  if (!cleared.ok()) co_return cleared;
  co_return std::string();  // RocksDB keeps no tombstone
}

// Reminder rows ride the state writer's group commit.
Task<absl::Status> RocksDbStorage::Upsert(ReminderRow row) {
  Completion<absl::Status> done;
  Impl::PendingWrite w;
  w.op = Impl::PendingWrite::Op::kReminderPut;
  w.reminder_key = ReminderKey(row.grain, row.name);
  w.bytes = EncodeReminder(row);
  w.status_done = &done;
  if (absl::Status queued = impl_->Write(std::move(w)); !queued.ok()) {
    co_return queued;
  }
  co_return co_await done;
}

Task<absl::Status> RocksDbStorage::Remove(GrainId grain, std::string name) {
  Completion<absl::Status> done;
  Impl::PendingWrite w;
  w.op = Impl::PendingWrite::Op::kReminderRemove;
  w.reminder_key = ReminderKey(grain, name);
  w.status_done = &done;
  if (absl::Status queued = impl_->Write(std::move(w)); !queued.ok()) {
    co_return queued;
  }
  co_return co_await done;
}

Task<absl::StatusOr<std::vector<ReminderRow>>> RocksDbStorage::ReadAll() {
  Impl::ReadAllDone done;
  if (absl::Status queued = impl_->ReadAllReminders(&done); !queued.ok()) {
    co_return queued;
  }
  co_return co_await done;
}

absl::Status RocksDbStorage::Health() { return impl_->Health(); }

int64_t RocksDbStorage::WriteErrors() { return impl_->WriteErrors(); }

}  // namespace granary::storage
