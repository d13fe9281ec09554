// File: storage/postgres/pg_pool.h
// -----------------------------------------------------------------------------
// A small pool of PostgreSQL connections, each with a thread of its own,
// that runs database work off the caller's thread and hands the outcome
// back as a Task: the runtime awaits the database and never blocks on it.
//
//   PgPoolOptions options;
//   options.conninfo = "host=127.0.0.1 port=5432 dbname=granary";
//   PgPool pool(options);
//   GRANARY_RETURN_IF_ERROR(pool.Start());
//   absl::StatusOr<int64_t> n = co_await pool.Run<int64_t>(
//       [](PgConnection& db) -> absl::StatusOr<int64_t> {
//         GRANARY_ASSIGN_OR_RETURN(PgResult r, db.Exec("SELECT 1"));
//         return r.Int64(0, 0);
//       });
//   pool.Stop();
//
// The awaiting coroutine resumes on the pool's thread (core/completion.h),
// so what follows the `co_await` must not block. A connection that broke,
// or that the server closed while it sat idle (PgConnection::Usable: a
// server restart), is replaced before its thread's next job runs; while the
// server cannot be reached jobs fail UNAVAILABLE at once (after one connection
// attempt, bounded by connect_timeout), so callers see the outage instead of
// queueing behind it. The queue is bounded: past max_queued jobs Run fails
// RESOURCE_EXHAUSTED.
//
// Lifecycle: New --Start()--> Running --Stop()--> Stopped. Stop runs the
// jobs already queued (they fail UNAVAILABLE once it began) and joins the
// threads; idempotent. Threading: Run is thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/completion.h"
#include "core/sync.h"
#include "core/task.h"
#include "storage/postgres/pg_connection.h"

namespace granary::storage {

struct PgPoolOptions {
  // libpq connection string or URI.
  std::string conninfo;
  // Connections, and so database statements in flight at once.
  int connections = 4;
  // One connection attempt; statements are cancelled after
  // statement_timeout.
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration statement_timeout = absl::Seconds(10);
  // Jobs waiting for a connection.
  size_t max_queued = 10000;
};

// OK, or INVALID_ARGUMENT naming the bad option.
absl::Status ValidatePgPoolOptions(const PgPoolOptions& options);

class PgPool {
 public:
  explicit PgPool(PgPoolOptions options) : options_(std::move(options)) {}
  ~PgPool() { Stop(); }
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  absl::Status Start();
  void Stop();

  // Runs `job` on a pooled connection (`job` gets a live connection).
  using Job = std::function<void(absl::StatusOr<PgConnection*>)>;
  void Submit(Job job);

  template <typename T>
  Task<absl::StatusOr<T>> Run(
      std::function<absl::StatusOr<T>(PgConnection&)> fn) {
    Completion<absl::StatusOr<T>> done;
    // The job owns `fn`; it touches `done` only to complete it, last.
    Submit([fn = std::move(fn), &done](absl::StatusOr<PgConnection*> db) {
      done.Complete(db.ok() ? fn(**db) : absl::StatusOr<T>(db.status()));
    });
    co_return co_await done;
  }

  const PgPoolOptions& options() const { return options_; }

 private:
  void Loop();

  const PgPoolOptions options_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace granary::storage
