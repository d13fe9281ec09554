// File: storage/postgres/pg_connection.h
// -----------------------------------------------------------------------------
// One libpq connection to PostgreSQL, with statuses instead of error codes:
// the building block of the PostgreSQL providers (storage/postgres/).
//
//   GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> db,
//                            PgConnection::Connect(conninfo,
//                            absl::Seconds(5)));
//   GRANARY_ASSIGN_OR_RETURN(
//       PgResult r, db->Exec("SELECT version FROM t WHERE id = $1", {"a"}));
//   int64_t v = r.Int64(0, 0);
//
// CONNINFO is a libpq connection string ("host=... dbname=...") or URI
// ("postgresql://user@host/db"). It may hold a password: RedactConninfo
// gives the form that may be logged, and no error message of this file
// includes the password.
//
// A statement that gets no answer within the statement timeout plus 2 s
// (a server or link gone silent) fails UNAVAILABLE and marks the
// connection broken, so no thread waits on a dead link for long.
// Statements with parameters are prepared on first use and then only
// executed (up to 64 per connection).
//
// Status codes (SQLSTATE classes): connection failures and server shutdown
// are UNAVAILABLE; bad credentials UNAUTHENTICATED; missing privileges
// PERMISSION_DENIED; serialization failures, deadlocks and unique
// violations ABORTED (a race: retry); a cancelled statement (statement
// timeout) DEADLINE_EXCEEDED; a missing table FAILED_PRECONDITION (the
// schema is not there); data exceptions INVALID_ARGUMENT; out of resources
// RESOURCE_EXHAUSTED; anything else INTERNAL.
//
// Threading: a connection is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct pg_conn;
struct pg_result;

namespace granary::storage {

// A statement parameter: text, or bytes sent in binary (bytea), or NULL.
struct PgParam {
  PgParam(std::string v) : value(std::move(v)) {}  // NOLINT: implicit
  PgParam(const char* v) : value(v) {}             // NOLINT: implicit
  static PgParam Bytes(std::string b) {
    PgParam p(std::move(b));
    p.binary = true;
    return p;
  }
  static PgParam Null() {
    PgParam p("");
    p.null = true;
    return p;
  }
  std::string value;
  bool binary = false;
  bool null = false;
};

// The rows of one statement (text format).
class PgResult {
 public:
  explicit PgResult(pg_result* r);
  PgResult(PgResult&&) noexcept;
  PgResult& operator=(PgResult&&) noexcept;
  ~PgResult();

  int rows() const;
  int affected() const;  // rows an INSERT/UPDATE/DELETE touched
  bool IsNull(int row, int col) const;
  absl::string_view Text(int row, int col) const;
  int64_t Int64(int row, int col) const;
  // A bytea column, decoded.
  std::string Bytes(int row, int col) const;

 private:
  pg_result* r_;
};

// The connection string, from the first of: `value` (--postgres), the
// contents of the file `file` (--postgres_file, surrounding whitespace
// dropped; for secrets), the environment variable GRANARY_POSTGRES.
// INVALID_ARGUMENT when both flags are set, none of the three is, the file
// cannot be read, or the string does not parse.
absl::StatusOr<std::string> ResolveConninfo(const std::string& value,
                                            const std::string& file);

// OK, or INVALID_ARGUMENT saying why libpq cannot parse `conninfo`.
absl::Status ValidateConninfo(const std::string& conninfo);
// OK when `conninfo` reaches only this machine (a Unix socket, localhost,
// a loopback address: host or hostaddr) or asks for sslmode=verify-full
// (in the string, or PGSSLMODE when the string sets none): a server
// elsewhere is then reached over TLS and must prove its name. Otherwise
// INVALID_ARGUMENT naming the host and what to set, unless
// `allow_insecure` (--allow_insecure_postgres).
absl::Status CheckConninfoTransport(const std::string& conninfo,
                                    bool allow_insecure);
// `conninfo` without its password, for logs: "host=h port=p dbname=d
// user=u" (the parameters that are set).
std::string RedactConninfo(const std::string& conninfo);

class PgConnection {
 public:
  // Connects within `timeout`, and sets the session's statement timeout to
  // `statement_timeout`. INVALID_ARGUMENT for a malformed CONNINFO,
  // UNAUTHENTICATED for rejected credentials, UNAVAILABLE when the server
  // cannot be reached.
  static absl::StatusOr<std::unique_ptr<PgConnection>> Connect(
      const std::string& conninfo, absl::Duration timeout,
      absl::Duration statement_timeout = absl::Seconds(10));
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // One statement with $1.. parameters.
  absl::StatusOr<PgResult> Exec(absl::string_view sql,
                                const std::vector<PgParam>& params = {});
  // Several statements, no parameters (a migration script).
  absl::Status ExecScript(const std::string& sql);

  // True once the connection was lost, or a statement got no answer in
  // time; it must then be replaced.
  bool broken() const;
  // Whether an idle connection can take a statement: false when it is
  // broken, or when the server sent something while it sat idle (a server
  // that shuts down or restarts sends its termination notice, then closes
  // the connection), which marks it broken. Cheap: one poll of its socket.
  bool Usable();

  // LISTEN on `channel` (letters, digits and _; INVALID_ARGUMENT
  // otherwise): NOTIFYs on it, committed by any session, are then queued
  // for AwaitNotifications.
  absl::Status Listen(absl::string_view channel);
  // The payloads of the notifications that came, waiting up to `timeout`
  // for the first (none: an empty list). UNAVAILABLE once the connection
  // is lost. Not while a statement runs.
  absl::StatusOr<std::vector<std::string>> AwaitNotifications(
      absl::Duration timeout);

 private:
  explicit PgConnection(pg_conn* c) : c_(c) {}
  // Takes the notifications libpq has read.
  void TakeNotifications(std::vector<std::string>* out);
  absl::Status ErrorOf(pg_result* r, absl::string_view what);
  // The sent statement's result (the first failed one of a script), or
  // nullptr with `error` set when none came within answer_timeout_.
  pg_result* AwaitResult(absl::string_view what, absl::Status* error);
  static absl::Status LostError(absl::string_view what);

  // Prepared statements of this connection: SQL text -> name.
  static constexpr size_t kMaxPrepared = 64;
  absl::flat_hash_map<std::string, std::string> prepared_;
  pg_conn* c_;
  absl::Duration answer_timeout_ = absl::Seconds(12);
  bool lost_ = false;
};

// Runs `body` between BEGIN (with `begin`, e.g. "BEGIN ISOLATION LEVEL
// REPEATABLE READ") and COMMIT; ROLLBACK when it fails. A COMMIT that does
// not answer leaves the outcome unknown: UNAVAILABLE.
template <typename T, typename Body>
absl::StatusOr<T> InTransaction(PgConnection& db, Body body,
                                absl::string_view begin = "BEGIN") {
  if (absl::StatusOr<PgResult> b = db.Exec(begin); !b.ok()) return b.status();
  absl::StatusOr<T> result = body();
  if (!result.ok()) {
    (void)db.Exec("ROLLBACK");
    return result;
  }
  if (absl::StatusOr<PgResult> c = db.Exec("COMMIT"); !c.ok()) {
    return c.status();
  }
  return result;
}

}  // namespace granary::storage
