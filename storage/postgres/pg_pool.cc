#include "storage/postgres/pg_pool.h"

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/thread_top.h"

namespace granary::storage {

absl::Status ValidatePgPoolOptions(const PgPoolOptions& o) {
  GRANARY_RETURN_IF_ERROR(ValidateConninfo(o.conninfo));
  if (o.connections < 1 || o.connections > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PostgreSQL connections=", o.connections, " must be in [1, 256]"));
  }
  if (o.connect_timeout < absl::Milliseconds(100) ||
      o.statement_timeout < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError(
        "PostgreSQL connect and statement timeouts must be at least 100ms");
  }
  if (o.max_queued < 1) {
    return absl::InvalidArgumentError("the PostgreSQL queue needs room");
  }
  return absl::OkStatus();
}

absl::Status PgPool::Start() {
  GRANARY_RETURN_IF_ERROR(ValidatePgPoolOptions(options_));
  MutexLock lock(&mu_);
  if (running_ || stopping_) {
    return absl::FailedPreconditionError("the PostgreSQL pool was started");
  }
  running_ = true;
  for (int i = 0; i < options_.connections; ++i) {
    threads_.emplace_back(
        [this] { RunThreadTop("pg_pool", [this] { Loop(); }); });
  }
  return absl::OkStatus();
}

void PgPool::Stop() {
  {
    MutexLock lock(&mu_);
    if (!running_) return;
    running_ = false;
    stopping_ = true;
    cv_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void PgPool::Submit(Job job) {
  absl::Status refused;
  {
    MutexLock lock(&mu_);
    if (!running_) {
      refused =
          absl::UnavailableError("PostgreSQL: the connection pool is stopped");
    } else if (queue_.size() >= options_.max_queued) {
      refused = absl::ResourceExhaustedError(absl::StrCat(
          "PostgreSQL: ", options_.max_queued, " statements are queued"));
    } else {
      queue_.push_back(std::move(job));
      cv_.Signal();
      return;
    }
  }
  job(refused);  // outside the lock: the job may resume a coroutine
}

void PgPool::Loop() {
  std::unique_ptr<PgConnection> db;
  while (true) {
    Job job;
    bool stopping;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && running_) cv_.Wait(&mu_);
      if (queue_.empty()) return;  // stopped, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      stopping = !running_;
    }
    if (stopping) {
      job(absl::UnavailableError("PostgreSQL: the connection pool stopped"));
      continue;
    }
    // A connection the server dropped while it sat idle (a restart) is
    // replaced before a caller's statement could fail on it.
    if (db != nullptr && !db->Usable()) db.reset();
    if (db == nullptr) {
      absl::StatusOr<std::unique_ptr<PgConnection>> c =
          PgConnection::Connect(options_.conninfo, options_.connect_timeout,
                                options_.statement_timeout);
      if (!c.ok()) {
        GRANARY_LOG(kWarning)
            << "postgres=" << RedactConninfo(options_.conninfo) << " "
            << c.status().message();
        job(c.status());
        continue;
      }
      db = *std::move(c);
    }
    job(db.get());
  }
}

}  // namespace granary::storage
