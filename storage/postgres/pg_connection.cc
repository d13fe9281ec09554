#include "storage/postgres/pg_connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/address.h"

namespace granary::storage {
namespace {

// libpq's messages end with a newline; statuses do not.
std::string Trimmed(const char* message) {
  return std::string(
      absl::StripTrailingAsciiWhitespace(message != nullptr ? message : ""));
}

// libpq's parse errors quote pieces of the string, which may be pieces of
// a password ("missing "=" after "secret""): each quoted piece but "=" is
// replaced by "...".
std::string WithoutQuotedText(const std::string& message) {
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t open = message.find('"', at);
    const size_t close =
        open == std::string::npos ? open : message.find('"', open + 1);
    if (close == std::string::npos) {
      out += message.substr(at);
      return out;
    }
    const std::string quoted = message.substr(open, close - open + 1);
    out += message.substr(at, open - at);
    out += quoted == "\"=\"" ? quoted : "\"...\"";
    at = close + 1;
  }
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
        absl::StrCat("the PostgreSQL connection string does not parse: ",
                     WithoutQuotedText(why),
                     " (quote a value with spaces: password='a b')"));
  }
  PQconninfoFree(options);
  return absl::OkStatus();
}

absl::Status CheckConninfoTransport(const std::string& conninfo,
                                    bool allow_insecure) {
  if (allow_insecure) return absl::OkStatus();
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), nullptr);
  if (options == nullptr) return ValidateConninfo(conninfo);
  std::vector<std::string> hosts, addrs;
  std::string sslmode;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const absl::string_view key = o->keyword;
    if (key == "host") hosts = absl::StrSplit(o->val, ',');
    if (key == "hostaddr") addrs = absl::StrSplit(o->val, ',');
    if (key == "sslmode") sslmode = o->val;
  }
  PQconninfoFree(options);
  if (sslmode.empty()) {
    const char* env = std::getenv("PGSSLMODE");
    if (env != nullptr) sslmode = env;
  }
  if (sslmode == "verify-full") return absl::OkStatus();
  // libpq's defaults when the string names no host: PGHOST, PGHOSTADDR,
  // else the Unix socket.
  if (hosts.empty()) {
    if (const char* env = std::getenv("PGHOST");
        env != nullptr && *env != '\0') {
      hosts = absl::StrSplit(env, ',');
    }
  }
  if (addrs.empty()) {
    if (const char* env = std::getenv("PGHOSTADDR");
        env != nullptr && *env != '\0') {
      addrs = absl::StrSplit(env, ',');
    }
  }
  const size_t n = std::max(hosts.size(), addrs.size());
  for (size_t i = 0; i < n; ++i) {
    // hostaddr, when given, is where libpq connects; host is then a name.
    std::string where = i < addrs.size()
                            ? std::string(absl::StripAsciiWhitespace(addrs[i]))
                            : "";
    if (where.empty() && i < hosts.size()) {
      where = std::string(absl::StripAsciiWhitespace(hosts[i]));
    }
    const bool local = where.empty() || where.front() == '/' ||
                       where.front() == '@' || IsLoopbackHost(where);
    if (!local) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the PostgreSQL host '", absl::CHexEscape(where.substr(0, 128)),
          "' is not on this machine, and the connection string has sslmode=",
          sslmode.empty() ? "prefer (the default)" : sslmode,
          ": set sslmode=verify-full and sslrootcert=CA_FILE so that the "
          "server proves its name over TLS, or pass "
          "--allow_insecure_postgres for a network you trust"));
    }
  }
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
  // The server cancels a statement at statement_timeout; the client stops
  // waiting a little later, for a server (or link) that no longer answers.
  db->answer_timeout_ = statement_timeout + absl::Seconds(2);
  absl::StatusOr<PgResult> set = db->Exec(absl::StrCat(
      "SET statement_timeout = ",
      std::max<int64_t>(1, absl::ToInt64Milliseconds(statement_timeout))));
  if (!set.ok()) return set.status();
  return db;
}

PgConnection::~PgConnection() { PQfinish(c_); }

absl::Status PgConnection::LostError(absl::string_view what) {
  return absl::UnavailableError(
      absl::StrCat("PostgreSQL, ", what,
                   ": the connection was dropped after a statement "
                   "got no answer"));
}

bool PgConnection::broken() const {
  return lost_ || PQstatus(c_) != CONNECTION_OK;
}

bool PgConnection::Usable() {
  if (broken()) return false;
  pollfd p{PQsocket(c_), POLLIN, 0};
  if (poll(&p, 1, 0) != 0) {
    // Nothing is due on an idle connection: whatever came (the server's
    // termination notice, its close, an error) means it is not to be
    // trusted with a caller's statement.
    (void)PQconsumeInput(c_);
    lost_ = true;
    return false;
  }
  return true;
}

absl::Status PgConnection::Listen(absl::string_view channel) {
  if (channel.empty() || channel.size() > 63 ||
      !std::all_of(channel.begin(), channel.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
      })) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", channel, "' is not a notification channel name"));
  }
  return Exec(absl::StrCat("LISTEN ", channel)).status();
}

void PgConnection::TakeNotifications(std::vector<std::string>* out) {
  while (PGnotify* n = PQnotifies(c_)) {
    out->emplace_back(n->extra != nullptr ? n->extra : "");
    PQfreemem(n);
  }
}

absl::StatusOr<std::vector<std::string>> PgConnection::AwaitNotifications(
    absl::Duration timeout) {
  std::vector<std::string> out;
  if (broken()) return LostError("waiting for notifications");
  TakeNotifications(&out);  // read with an earlier statement's answer
  if (!out.empty()) return out;
  pollfd p{PQsocket(c_), POLLIN, 0};
  const int ms = static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(timeout), 0, 24 * 3600 * 1000));
  const int ready = poll(&p, 1, ms);
  if (ready < 0 && errno != EINTR) {
    lost_ = true;
    return LostError("waiting for notifications");
  }
  if (ready > 0) {
    if (PQconsumeInput(c_) == 0 || PQstatus(c_) != CONNECTION_OK) {
      lost_ = true;
      return LostError("waiting for notifications");
    }
    TakeNotifications(&out);
  }
  return out;
}

pg_result* PgConnection::AwaitResult(absl::string_view what,
                                     absl::Status* error) {
  const absl::Time deadline = absl::Now() + answer_timeout_;
  pg_result* kept = nullptr;  // the first failed result, else the last
  while (true) {
    while (PQisBusy(c_)) {
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left <= 0) {
        lost_ = true;  // the connection is replaced before its next use
        if (kept != nullptr) PQclear(kept);
        *error = absl::UnavailableError(
            absl::StrCat("PostgreSQL, ", what, ": no answer within ",
                         absl::FormatDuration(answer_timeout_),
                         "; the connection is dropped"));
        return nullptr;
      }
      pollfd p{PQsocket(c_), POLLIN, 0};
      const int n =
          poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (n < 0 && errno != EINTR) break;
      if (n > 0 && PQconsumeInput(c_) == 0) break;  // lost: the result says
    }
    pg_result* r = PQgetResult(c_);
    if (r == nullptr) break;
    const bool kept_failed = kept != nullptr &&
                             PQresultStatus(kept) != PGRES_COMMAND_OK &&
                             PQresultStatus(kept) != PGRES_TUPLES_OK;
    if (kept_failed) {
      PQclear(r);
    } else {
      if (kept != nullptr) PQclear(kept);
      kept = r;
    }
    if (PQstatus(c_) != CONNECTION_OK) break;
  }
  return kept;
}

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
  const std::string what = statement.substr(0, statement.find(' '));
  if (lost_) return LostError(what);
  // Statements with parameters are the stores' hot path: each is parsed
  // and planned once per connection (a prepared statement), then only
  // executed.
  const std::string* prepared = nullptr;
  if (!params.empty()) {
    auto it = prepared_.find(statement);
    if (it == prepared_.end() && prepared_.size() < kMaxPrepared) {
      const std::string name = absl::StrCat("granary_", prepared_.size());
      if (PQsendPrepare(c_, name.c_str(), statement.c_str(),
                        static_cast<int>(params.size()), nullptr) == 0) {
        return ErrorOf(nullptr, what);
      }
      absl::Status timed_out;
      pg_result* p = AwaitResult(what, &timed_out);
      if (!timed_out.ok()) return timed_out;
      if (p == nullptr || PQresultStatus(p) != PGRES_COMMAND_OK) {
        return ErrorOf(p, what);
      }
      PQclear(p);
      it = prepared_.emplace(statement, name).first;
    }
    if (it != prepared_.end()) prepared = &it->second;
  }
  pg_result* r = nullptr;
  const int sent =
      prepared != nullptr
          ? PQsendQueryPrepared(c_, prepared->c_str(),
                                static_cast<int>(params.size()), values.data(),
                                lengths.data(), formats.data(),
                                /*resultFormat=*/0)
          : PQsendQueryParams(c_, statement.c_str(),
                              static_cast<int>(params.size()), nullptr,
                              values.data(), lengths.data(), formats.data(),
                              /*resultFormat=*/0);
  if (sent != 0) {
    absl::Status timed_out;
    r = AwaitResult(what, &timed_out);
    if (!timed_out.ok()) return timed_out;
  }
  const ExecStatusType s = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    return ErrorOf(r, what);
  }
  return PgResult(r);
}

absl::Status PgConnection::ExecScript(const std::string& sql) {
  if (lost_) return LostError("script");
  pg_result* r = nullptr;
  if (PQsendQuery(c_, sql.c_str()) != 0) {
    absl::Status timed_out;
    r = AwaitResult("script", &timed_out);
    if (!timed_out.ok()) return timed_out;
  }
  const ExecStatusType s = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    return ErrorOf(r, "script");
  }
  PQclear(r);
  return absl::OkStatus();
}

}  // namespace granary::storage
