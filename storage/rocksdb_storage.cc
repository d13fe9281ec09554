#include "storage/rocksdb_storage.h"

#include <algorithm>
#include <cstring>
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
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"

namespace granary::storage {
namespace {

constexpr char kStateFamily[] = "grain_state";
constexpr char kRemindersFamily[] = "reminders";
constexpr char kFormatKey[] = "granary.format";
constexpr size_t kVersionBytes = 8;

std::string EncodeValue(uint64_t version, const std::string& bytes) {
  std::string value(kVersionBytes, '\0');
  absl::little_endian::Store64(value.data(), version);
  value.append(bytes);
  return value;
}

// The version of a stored value, or 0 when it is too short to hold one.
uint64_t DecodeVersion(const std::string& value) {
  if (value.size() < kVersionBytes) return 0;
  return absl::little_endian::Load64(value.data());
}

std::string Etag(uint64_t version) {
  return version == 0 ? std::string() : absl::StrCat(version);
}

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsCorruption()) {
    return absl::DataLossError(absl::StrCat(what, ": ", s.ToString()));
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", s.ToString()));
}

constexpr char kReminderFormat = 1;
constexpr size_t kReminderValueBytes = 1 + 8 + 8;

std::string EncodeReminder(const ReminderRow& row) {
  std::string value(kReminderValueBytes, '\0');
  value[0] = kReminderFormat;
  absl::little_endian::Store64(value.data() + 1,
                               static_cast<uint64_t>(absl::ToUnixMicros(row.start)));
  absl::little_endian::Store64(
      value.data() + 9,
      static_cast<uint64_t>(absl::ToInt64Microseconds(row.period)));
  return value;
}

// The row stored under `key` / `value`, or an error naming what is wrong.
absl::StatusOr<ReminderRow> DecodeReminder(absl::string_view key,
                                           absl::string_view value) {
  const size_t nul = key.find('\0');
  if (nul == absl::string_view::npos || nul == 0 || key.size() < nul + 5) {
    return absl::DataLossError("reminder key is malformed");
  }
  const absl::string_view type = key.substr(0, nul);
  const uint32_t key_len = absl::big_endian::Load32(key.data() + nul + 1);
  const size_t key_at = nul + 5;
  if (key.size() - key_at < key_len) {
    return absl::DataLossError("reminder key is truncated");
  }
  ReminderRow row;
  row.grain = GrainId(InternTypeName(type),
                      std::string(key.substr(key_at, key_len)));
  row.name = std::string(key.substr(key_at + key_len));
  if (value.size() != kReminderValueBytes || value[0] != kReminderFormat) {
    return absl::DataLossError(absl::StrCat(
        "reminder '", row.name, "' of ", row.grain.ToString(),
        " has an unknown value format (", value.size(), " bytes)"));
  }
  row.start = absl::FromUnixMicros(
      static_cast<int64_t>(absl::little_endian::Load64(value.data() + 1)));
  row.period = absl::Microseconds(
      static_cast<int64_t>(absl::little_endian::Load64(value.data() + 9)));
  return row;
}

}  // namespace

std::string StateKey(const GrainId& id) {
  std::string key(id.type());
  key.push_back('\0');
  key.append(id.key());
  return key;
}

std::string ReminderKey(const GrainId& grain, absl::string_view name) {
  std::string key(grain.type());
  key.push_back('\0');
  char len[4];
  absl::big_endian::Store32(len, static_cast<uint32_t>(grain.key().size()));
  key.append(len, 4);
  key.append(grain.key());
  key.append(name.data(), name.size());
  return key;
}

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
    std::error_code ec;
    const bool exists = fs::exists(path_, ec);
    const bool fresh = !exists || fs::is_empty(path_, ec);
    if (!fresh && !fs::exists(fs::path(path_) / "CURRENT", ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", path_, "' is not empty and is not a Granary data directory "
          "(no RocksDB database in it); refusing to touch it"));
    }
    if (fresh) {
      fs::create_directories(path_, ec);
      if (ec) {
        return absl::UnavailableError(absl::StrCat(
            "cannot create '", path_, "': ", ec.message()));
      }
    }
    rocksdb::Options db_options;
    db_options.create_if_missing = fresh;
    db_options.create_missing_column_families = fresh;
    db_options.error_if_exists = false;
    db_options.paranoid_checks = true;
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
          return absl::FailedPreconditionError(absl::StrCat(
              "'", path_, "' is a RocksDB database but not a Granary data "
              "directory (no column family '", want, "'); refusing to touch "
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
      GRANARY_RETURN_IF_ERROR(FromRocks(
          db_->Put(write, handles_[0], kFormatKey, kFormat),
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
    writer_ = std::thread([this] { WriterLoop(); });
    reader_ = std::thread([this] { ReaderLoop(); });
    GRANARY_LOG(kInfo) << "path=" << LogQuote(path_)
                       << " durability=" << (sync_ ? "sync" : "async")
                       << " storage: RocksDB opened";
    return absl::OkStatus();
  }

  void Read(GrainId id, ReadDone* done) {
    MutexLock lock(&mu_);
    reads_.push_back(PendingRead{std::move(id), done, nullptr});
    cv_.SignalAll();
  }

  void ReadAllReminders(ReadAllDone* done) {
    MutexLock lock(&mu_);
    reads_.push_back(PendingRead{GrainId(), nullptr, done});
    cv_.SignalAll();
  }

  void Write(PendingWrite w) {
    MutexLock lock(&mu_);
    writes_.push_back(std::move(w));
    cv_.SignalAll();
  }

 private:
  struct PendingRead {
    GrainId id;
    ReadDone* done;
    ReadAllDone* all_reminders;  // set instead of `done` for ReadAll
  };

  absl::Status OpenError(const rocksdb::Status& s) {
    if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data directory '", path_, "' is in use by another process (",
          s.ToString(), ")"));
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
    if (value.size() < kVersionBytes) {
      return absl::DataLossError(
          absl::StrCat("stored state of ", id.ToString(), " is truncated"));
    }
    StoredState state;
    state.exists = true;
    state.etag = Etag(DecodeVersion(value));
    state.bytes = value.substr(kVersionBytes);
    return state;
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
        GRANARY_LOG(kError) << "storage: skipping a reminder row: "
                            << row.status();
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
        while (writes_.empty() && !stopping_) cv_.Wait(&mu_);
        if (writes_.empty()) return;
        group.swap(writes_);
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
            outcome[i] = FromRocks(s, absl::StrCat("reading ", w.id.ToString()));
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
      const absl::Status committed =
          batch.Count() == 0
              ? absl::OkStatus()
              : FromRocks(db_->Write(write, &batch), "writing grain state");
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
  impl_->Read(std::move(id), &done);
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
  impl_->Write(std::move(w));
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
  impl_->Write(std::move(w));
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
  impl_->Write(std::move(w));
  co_return co_await done;
}

Task<absl::Status> RocksDbStorage::Remove(GrainId grain, std::string name) {
  Completion<absl::Status> done;
  Impl::PendingWrite w;
  w.op = Impl::PendingWrite::Op::kReminderRemove;
  w.reminder_key = ReminderKey(grain, name);
  w.status_done = &done;
  impl_->Write(std::move(w));
  co_return co_await done;
}

Task<absl::StatusOr<std::vector<ReminderRow>>> RocksDbStorage::ReadAll() {
  Impl::ReadAllDone done;
  impl_->ReadAllReminders(&done);
  co_return co_await done;
}

}  // namespace granary::storage
