// File: bench/postgres_floor.h
// -----------------------------------------------------------------------------
// PostgreSQL's own floor for the storage scenarios on PostgreSQL
// (granary-bench --hosted --storage=postgres): the `postgres_floor`
// scenario. One round is one run of PostgreSQL's pgbench with one client
// doing synced single-row UPDATEs,
//
//   UPDATE granary_bench_floor SET v = v + 1 WHERE id = 1
//
// (-n, -c 1, -M prepared, -t OPS, a per-transaction log with -l), and its
// samples are the latencies pgbench logged: the cheapest durable write the
// server offers, against which `durable-write` is read (RATIO line, goal
// ≤ 1.5×). The round is verified when pgbench exited 0, logged OPS
// transactions none of which failed, `v` grew by exactly OPS, and the
// server commits synchronously (fsync and synchronous_commit on).
//
//   absl::StatusOr<std::unique_ptr<PostgresFloor>> floor =
//       PostgresFloor::Prepare(conninfo, FindPgbench());
//   ScenarioResult r;
//   (*floor)->Run(/*ops=*/2000, r);
//
// pgbench gets the connection string in its environment (PGDATABASE, which
// pgbench expands as a connection string), never on its command line.
//
// Threading: one thread uses a PostgresFloor at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/report.h"

namespace granary::bench {

// What a pgbench per-transaction log (-l, one client, no --sampling-rate)
// says. Each line is
//   client_id transaction_no time script_no time_epoch time_us [...]
// where `time` is the transaction's latency in µs and time_epoch.time_us
// when it ended; a failed transaction has "failed" (or "skipped") in place
// of its latency.
struct PgbenchLog {
  std::vector<int64_t> latencies_ns;
  int64_t failed = 0;
  // Start of the first transaction and end of the last, µs since the epoch.
  int64_t first_start_us = 0;
  int64_t last_end_us = 0;
};
// INVALID_ARGUMENT naming the line that does not parse.
absl::StatusOr<PgbenchLog> ParsePgbenchLog(absl::string_view text);

// The newest installed pgbench (/usr/lib/postgresql/*/bin/pgbench, as
// tests/postgres_server.cc finds initdb), or "" when there is none.
std::string FindPgbench();

class PostgresFloor {
 public:
  // Connects to `conninfo`, reads whether the server commits synchronously,
  // creates the table granary_bench_floor (id 1, v) when it is missing, and
  // writes pgbench's script to a private temporary directory.
  // INVALID_ARGUMENT when `pgbench` is not an executable.
  static absl::StatusOr<std::unique_ptr<PostgresFloor>> Prepare(
      const std::string& conninfo, const std::string& pgbench);
  ~PostgresFloor();  // removes the temporary directory
  PostgresFloor(const PostgresFloor&) = delete;
  PostgresFloor& operator=(const PostgresFloor&) = delete;

  // One round of `ops` UPDATEs: fills r's ops, samples, seconds (first
  // start to last end, as pgbench logged them), errors, verified, failure.
  void Run(int64_t ops, ScenarioResult& r);

  // The server's settings, as SHOW reports them ("on", "off", ...).
  const std::string& fsync() const { return fsync_; }
  const std::string& synchronous_commit() const { return synchronous_commit_; }
  // "15.18": server_version without the build note that may follow.
  const std::string& server_version() const { return server_version_; }

 private:
  PostgresFloor() = default;
  absl::StatusOr<int64_t> ReadValue();

  std::string conninfo_;
  std::string pgbench_;
  std::string dir_;
  std::string fsync_, synchronous_commit_, server_version_;
  int round_ = 0;
};

}  // namespace granary::bench
