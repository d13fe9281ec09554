#include "bench/postgres_floor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/stats.h"
#include "core/status.h"
#include "storage/postgres/pg_connection.h"

extern char** environ;

namespace granary::bench {
namespace {

constexpr char kScript[] =
    "UPDATE granary_bench_floor SET v = v + 1 WHERE id = 1;\n";

absl::StatusOr<std::unique_ptr<storage::PgConnection>> Connect(
    const std::string& conninfo) {
  return storage::PgConnection::Connect(conninfo, absl::Seconds(10));
}

absl::StatusOr<std::string> Show(storage::PgConnection& db,
                                 const std::string& setting) {
  GRANARY_ASSIGN_OR_RETURN(storage::PgResult r,
                           db.Exec(absl::StrCat("SHOW ", setting)));
  if (r.rows() != 1) {
    return absl::InternalError(absl::StrCat("SHOW ", setting, ": no row"));
  }
  return std::string(r.Text(0, 0));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last non-empty line of `text`, for a failure message.
std::string LastLine(absl::string_view text) {
  text = absl::StripTrailingAsciiWhitespace(text);
  const size_t nl = text.rfind('\n');
  return std::string(nl == absl::string_view::npos ? text
                                                   : text.substr(nl + 1));
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) {
    return absl::StrCat("exit status ", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

// This process's environment with PGDATABASE set to `conninfo` (pgbench
// expands a PGDATABASE holding '=' as a connection string).
std::vector<std::string> PgbenchEnvironment(const std::string& conninfo) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "PGDATABASE=")) env.emplace_back(*e);
  }
  env.push_back(absl::StrCat("PGDATABASE=", conninfo));
  return env;
}

// Runs `argv` with `env`, its stdout and stderr to `output`; its wait
// status, killing it after `timeout`.
absl::StatusOr<int> RunProcess(std::vector<std::string> argv,
                               std::vector<std::string> env,
                               const std::string& output,
                               absl::Duration timeout) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args, envp;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr,
                             args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot start ", argv[0], ": ", std::strerror(rc)));
  }
  const absl::Time give_up = absl::Now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (absl::Now() > give_up) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(absl::StrCat(
          argv[0], " did not finish within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace

absl::StatusOr<PgbenchLog> ParsePgbenchLog(absl::string_view text) {
  PgbenchLog log;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t epoch = 0, us = 0;
    if (f.size() < 6 || !absl::SimpleAtoi(f[4], &epoch) ||
        !absl::SimpleAtoi(f[5], &us)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pgbench log line ", line_no, " does not parse: '", line, "'"));
    }
    const int64_t end_us = epoch * 1000000 + us;
    int64_t latency_us = 0;
    if (f[2] == "failed" || f[2] == "skipped") {
      ++log.failed;
    } else if (absl::SimpleAtoi(f[2], &latency_us) && latency_us >= 0) {
      log.latencies_ns.push_back(latency_us * 1000);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "pgbench log line ", line_no, " has no latency: '", line, "'"));
    }
    const int64_t start_us = end_us - latency_us;
    if (log.first_start_us == 0 || start_us < log.first_start_us) {
      log.first_start_us = start_us;
    }
    log.last_end_us = std::max(log.last_end_us, end_us);
  }
  return log;
}

std::string FindPgbench() {
  std::string best;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string bin = (e.path() / "bin").string();
    // "15" > "14", and so on: the newest major version.
    if (std::filesystem::exists(bin + "/pgbench") && bin > best) best = bin;
  }
  return best.empty() ? "" : best + "/pgbench";
}

absl::StatusOr<std::unique_ptr<PostgresFloor>> PostgresFloor::Prepare(
    const std::string& conninfo, const std::string& pgbench) {
  if (pgbench.empty() || access(pgbench.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no pgbench at '", pgbench,
                     "' (the postgresql package installs it; --pgbench=PATH)"));
  }
  auto floor = std::unique_ptr<PostgresFloor>(new PostgresFloor);
  floor->conninfo_ = conninfo;
  floor->pgbench_ = pgbench;
  {
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<storage::PgConnection> db,
                             Connect(conninfo));
    GRANARY_ASSIGN_OR_RETURN(floor->fsync_, Show(*db, "fsync"));
    GRANARY_ASSIGN_OR_RETURN(floor->synchronous_commit_,
                             Show(*db, "synchronous_commit"));
    GRANARY_ASSIGN_OR_RETURN(std::string version, Show(*db, "server_version"));
    // "15.18 (Debian 15.18-0+deb12u1)": the version alone.
    floor->server_version_ = version.substr(0, version.find(' '));
    GRANARY_RETURN_IF_ERROR(
        db->Exec("CREATE TABLE IF NOT EXISTS granary_bench_floor ("
                 "id integer PRIMARY KEY, v bigint NOT NULL)")
            .status());
    GRANARY_RETURN_IF_ERROR(
        db->Exec("INSERT INTO granary_bench_floor VALUES (1, 0) "
                 "ON CONFLICT (id) DO NOTHING")
            .status());
  }
  std::string dir =
      (std::filesystem::temp_directory_path() / "granary-bench-floor-XXXXXX")
          .string();
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  floor->dir_ = dir;
  std::ofstream(dir + "/floor.sql") << kScript;
  return floor;
}

PostgresFloor::~PostgresFloor() {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

absl::StatusOr<int64_t> PostgresFloor::ReadValue() {
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<storage::PgConnection> db,
                           Connect(conninfo_));
  GRANARY_ASSIGN_OR_RETURN(
      storage::PgResult r,
      db->Exec("SELECT v FROM granary_bench_floor WHERE id = 1"));
  if (r.rows() != 1) {
    return absl::FailedPreconditionError("granary_bench_floor has no row 1");
  }
  return r.Int64(0, 0);
}

void PostgresFloor::Run(int64_t ops, ScenarioResult& r) {
  r.ops = ops;
  auto fail = [&r](std::string why) {
    r.verified = false;
    if (r.failure.empty()) r.failure = std::move(why);
  };
  absl::StatusOr<int64_t> before = ReadValue();
  if (!before.ok()) {
    fail(absl::StrCat("cannot read granary_bench_floor: ",
                      before.status().ToString()));
    return;
  }
  const int round = round_++;
  const std::string prefix = absl::StrCat(dir_, "/round-", round);
  const std::string output = prefix + ".out";
  // Generous: a synced commit takes milliseconds, not 50.
  const absl::Duration timeout =
      absl::Seconds(60) + absl::Milliseconds(50) * ops;
  absl::StatusOr<int> status =
      RunProcess({pgbench_, "-n", "-c", "1", "-j", "1", "-M", "prepared", "-t",
                  absl::StrCat(ops), "-f", dir_ + "/floor.sql", "-l",
                  absl::StrCat("--log-prefix=", prefix)},
                 PgbenchEnvironment(conninfo_), output, timeout);
  if (!status.ok()) {
    fail(status.status().ToString());
    return;
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    fail(absl::StrCat("pgbench: ", DescribeExit(*status), ": ",
                      LastLine(ReadFile(output))));
    return;
  }
  // One client, one thread: pgbench logs to PREFIX.<its pid>.
  std::string log_path;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, absl::StrCat("round-", round, ".")) &&
        !absl::EndsWith(name, ".out")) {
      log_path = e.path().string();
    }
  }
  if (log_path.empty()) {
    fail("pgbench wrote no transaction log");
    return;
  }
  absl::StatusOr<PgbenchLog> log = ParsePgbenchLog(ReadFile(log_path));
  std::filesystem::remove(log_path, ec);
  std::filesystem::remove(output, ec);
  if (!log.ok()) {
    fail(log.status().ToString());
    return;
  }
  r.latencies_ns = std::move(log->latencies_ns);
  r.seconds = (log->last_end_us - log->first_start_us) / 1e6;
  r.errors = log->failed;
  r.verified = true;
  const int64_t logged = static_cast<int64_t>(r.latencies_ns.size());
  if (log->failed > 0 || logged != ops) {
    fail(absl::StrCat("pgbench logged ", logged, " transactions and ",
                      log->failed, " failures, expected ", ops,
                      " transactions"));
  }
  absl::StatusOr<int64_t> after = ReadValue();
  if (!after.ok()) {
    fail(absl::StrCat("cannot read granary_bench_floor: ",
                      after.status().ToString()));
  } else if (*after - *before != ops) {
    fail(absl::StrCat("v grew by ", *after - *before, ", expected ", ops,
                      " (is another run using granary_bench_floor?)"));
  }
  // synchronous_commit=local or remote_* sync locally too; only off does not.
  if (fsync_ != "on" || synchronous_commit_ == "off") {
    fail(absl::StrCat("the server runs with fsync=", fsync_,
                      " synchronous_commit=", synchronous_commit_,
                      ": its commits are not synced, so this is no floor "
                      "for a durable write"));
  }
}

}  // namespace granary::bench
