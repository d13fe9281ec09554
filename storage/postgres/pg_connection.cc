#include "storage/postgres/pg_connection.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace granary::storage {
namespace {

// libpq's messages end with a newline; statuses do not.
std::string Trimmed(const char* message) {
  return std::string(
      absl::StripTrailingAsciiWhitespace(message != nullptr ? message : ""));
}

absl::StatusCode CodeOfSqlState(absl::string_view state) {
  if (state.size() != 5) return absl::StatusCode::kUnavailable;  // no answer
  const absl::string_view cls = state.substr(0, 2);
  if (cls == "08") return absl::StatusCode::kUnavailable;
  if (cls == "28") return absl::StatusCode::kUnauthenticated;
  if (cls == "40") return absl::StatusCode::kAborted;
  if (cls == "53") return absl::StatusCode::kResourceExhausted;
  if (cls == "22") return absl::StatusCode::kInvalidArgument;
  if (state == "42501") return absl::StatusCode::kPermissionDenied;
  if (state == "42P01") return absl::StatusCode::kFailedPrecondition;
  if (state == "23505") return absl::StatusCode::kAborted;
  if (state == "57014") return absl::StatusCode::kDeadlineExceeded;
  if (cls == "57") return absl::StatusCode::kUnavailable;    // shutting down
  if (state == "3D000") return absl::StatusCode::kNotFound;  // no database
  return absl::StatusCode::kInternal;
}

}  // namespace

PgResult::PgResult(pg_result* r) : r_(r) {}
PgResult::PgResult(PgResult&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
PgResult& PgResult::operator=(PgResult&& o) noexcept {
  if (this != &o) {
    if (r_ != nullptr) PQclear(r_);
    r_ = std::exchange(o.r_, nullptr);
  }
  return *this;
}
PgResult::~PgResult() {
  if (r_ != nullptr) PQclear(r_);
}
int PgResult::rows() const { return PQntuples(r_); }
int PgResult::affected() const {
  int n = 0;
  (void)absl::SimpleAtoi(PQcmdTuples(r_), &n);
  return n;
}
bool PgResult::IsNull(int row, int col) const {
  return PQgetisnull(r_, row, col) != 0;
}
absl::string_view PgResult::Text(int row, int col) const {
  return absl::string_view(PQgetvalue(r_, row, col),
                           static_cast<size_t>(PQgetlength(r_, row, col)));
}
int64_t PgResult::Int64(int row, int col) const {
  int64_t v = 0;
  (void)absl::SimpleAtoi(Text(row, col), &v);
  return v;
}
std::string PgResult::Bytes(int row, int col) const {
  size_t n = 0;
  unsigned char* raw = PQunescapeBytea(
      reinterpret_cast<const unsigned char*>(PQgetvalue(r_, row, col)), &n);
  if (raw == nullptr) return std::string();
  std::string out(reinterpret_cast<const char*>(raw), n);
  PQfreemem(raw);
  return out;
}

absl::StatusOr<std::string> ResolveConninfo(const std::string& value,
                                            const std::string& file) {
  if (!value.empty() && !file.empty()) {
    return absl::InvalidArgumentError(
        "give --postgres or --postgres_file, not both");
  }
  std::string conninfo = value;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat("--postgres_file=", file, " cannot be read"));
    }
    std::stringstream contents;
    contents << in.rdbuf();
    conninfo = std::string(absl::StripAsciiWhitespace(contents.str()));
    if (conninfo.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--postgres_file=", file, " is empty"));
    }
  }
  if (conninfo.empty()) {
    const char* env = std::getenv("GRANARY_POSTGRES");
    if (env != nullptr) conninfo = env;
  }
  if (conninfo.empty()) {
    return absl::InvalidArgumentError(
        "no PostgreSQL connection string: give --postgres=CONNINFO, "
        "--postgres_file=FILE or GRANARY_POSTGRES");
  }
  if (absl::Status v = ValidateConninfo(conninfo); !v.ok()) return v;
  return conninfo;
}

absl::Status ValidateConninfo(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    std::string why = error != nullptr ? Trimmed(error) : "out of memory";
    if (error != nullptr) PQfreemem(error);
    return absl::InvalidArgumentError(
        absl::StrCat("the PostgreSQL connection string does not parse: ", why));
  }
  PQconninfoFree(options);
  return absl::OkStatus();
}

std::string RedactConninfo(const std::string& conninfo) {
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), nullptr);
  if (options == nullptr) return "(unparsable connection string)";
  std::vector<std::string> parts;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    const absl::string_view key = o->keyword;
    if (o->val == nullptr || *o->val == '\0') continue;
    if (key == "host" || key == "hostaddr" || key == "port" ||
        key == "dbname" || key == "user" || key == "sslmode") {
      parts.push_back(absl::StrCat(key, "=", o->val));
    }
  }
  PQconninfoFree(options);
  return parts.empty() ? "(libpq defaults)" : absl::StrJoin(parts, " ");
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Connect(
    const std::string& conninfo, absl::Duration timeout,
    absl::Duration statement_timeout) {
  if (absl::Status valid = ValidateConninfo(conninfo); !valid.ok()) {
    return valid;
  }
  // The connection string comes last so that what it sets wins, except the
  // timeout, which the caller's deadline bounds.
  const std::string seconds = absl::StrCat(
      std::max<int64_t>(2, absl::ToInt64Seconds(timeout + absl::Seconds(1))));
  const char* keys[] = {"application_name", "dbname", "connect_timeout",
                        nullptr};
  const char* values[] = {"granary", conninfo.c_str(), seconds.c_str(),
                          nullptr};
  pg_conn* c = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (c == nullptr) return absl::ResourceExhaustedError("libpq: out of memory");
  if (PQstatus(c) != CONNECTION_OK) {
    const std::string why = Trimmed(PQerrorMessage(c));
    PQfinish(c);
    const bool auth = why.find("password") != std::string::npos ||
                      why.find("authentication") != std::string::npos;
    const std::string where = RedactConninfo(conninfo);
    if (auth) {
      return absl::UnauthenticatedError(absl::StrCat(
          "PostgreSQL (", where, ") refused the credentials: ", why));
    }
    if (why.find("does not exist") != std::string::npos) {
      return absl::NotFoundError(
          absl::StrCat("PostgreSQL (", where, "): ", why));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot connect to PostgreSQL (", where, "): ", why));
  }
  // Server notices (e.g. "already exists, skipping") are not errors.
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);
  auto db = std::unique_ptr<PgConnection>(new PgConnection(c));
  absl::StatusOr<PgResult> set = db->Exec(absl::StrCat(
      "SET statement_timeout = ",
      std::max<int64_t>(1, absl::ToInt64Milliseconds(statement_timeout))));
  if (!set.ok()) return set.status();
  return db;
}

PgConnection::~PgConnection() { PQfinish(c_); }

bool PgConnection::broken() const { return PQstatus(c_) != CONNECTION_OK; }

absl::Status PgConnection::ErrorOf(pg_result* r, absl::string_view what) {
  const char* state =
      r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string message =
      Trimmed(r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(c_));
  if (message.empty()) message = Trimmed(PQerrorMessage(c_));
  const absl::StatusCode code =
      state != nullptr ? CodeOfSqlState(state) : absl::StatusCode::kUnavailable;
  if (r != nullptr) PQclear(r);
  return absl::Status(code, absl::StrCat("PostgreSQL, ", what, ": ", message));
}

absl::StatusOr<PgResult> PgConnection::Exec(
    absl::string_view sql, const std::vector<PgParam>& params) {
  std::vector<const char*> values(params.size());
  std::vector<int> lengths(params.size()), formats(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values[i] = params[i].null ? nullptr : params[i].value.data();
    lengths[i] = static_cast<int>(params[i].value.size());
    formats[i] = params[i].binary ? 1 : 0;
  }
  const std::string statement(sql);
  pg_result* r =
      PQexecParams(c_, statement.c_str(), static_cast<int>(params.size()),
                   nullptr, values.data(), lengths.data(), formats.data(),
                   /*resultFormat=*/0);
  const ExecStatusType s = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    return ErrorOf(r, statement.substr(0, statement.find(' ')));
  }
  return PgResult(r);
}

absl::Status PgConnection::ExecScript(const std::string& sql) {
  pg_result* r = PQexec(c_, sql.c_str());
  const ExecStatusType s = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    return ErrorOf(r, "script");
  }
  PQclear(r);
  return absl::OkStatus();
}

}  // namespace granary::storage
