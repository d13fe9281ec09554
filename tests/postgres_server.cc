#include "tests/postgres_server.h"

#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/schema.h"

namespace granary::testing {
namespace {

// Whether every directory from / down to `dir` lets other users through
// (the server runs as the `postgres` user).
bool EveryoneMayEnter(const std::string& dir) {
  std::filesystem::path at = std::filesystem::absolute(dir);
  while (true) {
    struct stat st;
    if (stat(at.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) return false;
    if (at == at.root_path()) return true;
    at = at.parent_path();
  }
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// The newest installed PostgreSQL's bin directory.
std::string PostgresBin() {
  std::string best;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string bin = (e.path() / "bin").string();
    if (std::filesystem::exists(bin + "/initdb") && bin > best) best = bin;
  }
  return best;
}

// Runs a shell command as the server's user; its exit code.
int RunAs(const std::string& command) {
  const std::string line =
      geteuid() == 0 ? absl::StrCat("runuser -u postgres -- sh -c '", command,
                                    "' > /dev/null 2>&1")
                     : absl::StrCat("sh -c '", command, "' > /dev/null 2>&1");
  return std::system(line.c_str());
}

}  // namespace

std::unique_ptr<PostgresServer> PostgresServer::Start() {
  auto pg = std::unique_ptr<PostgresServer>(new PostgresServer);
  pg->bin_ = PostgresBin();
  if (pg->bin_.empty()) {
    ADD_FAILURE() << "no PostgreSQL server under /usr/lib/postgresql "
                     "(scripts/install-deps.sh installs it)";
    return nullptr;
  }
  // In the test's temporary directory (scripts/test-launcher.sh removes it,
  // and stops a server left running there), unless, as root, the
  // `postgres` user could not reach it: then under /tmp.
  const char* tmp = std::getenv("TMPDIR");
  if (tmp != nullptr && geteuid() == 0 && !EveryoneMayEnter(tmp)) {
    tmp = nullptr;
  }
  std::string pattern =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/granary-pg-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return nullptr;
  }
  pg->dir_ = pattern;
  std::ofstream(pg->dir_ + "/pwfile") << kPassword << "\n";
  if (geteuid() == 0) {
    const passwd* user = getpwnam("postgres");
    if (user == nullptr) {
      ADD_FAILURE() << "no `postgres` system user (the postgresql package "
                       "creates it)";
      return nullptr;
    }
    for (const std::string& p : {pg->dir_, pg->dir_ + "/pwfile"}) {
      if (chown(p.c_str(), user->pw_uid, user->pw_gid) != 0) {
        ADD_FAILURE() << "chown " << p << " failed";
        return nullptr;
      }
    }
  }
  const int initdb = RunAs(absl::StrCat(
      pg->bin_, "/initdb -D ", pg->dir_,
      "/data -U postgres --pwfile=", pg->dir_,
      "/pwfile --auth-local=trust --auth-host=scram-sha-256 -E UTF8 "
      "--no-sync"));
  if (initdb != 0) {
    ADD_FAILURE() << "initdb failed (" << initdb << ")";
    return nullptr;
  }
  pg->port_ = FreePort();
  if (absl::Status s = pg->StartAgain(); !s.ok()) {
    ADD_FAILURE() << s << "\n" << pg->Log();
    return nullptr;
  }
  return pg;
}

absl::Status PostgresServer::PgCtl(const std::string& args) {
  const int rc = RunAs(absl::StrCat(bin_, "/pg_ctl -D ", dir_, "/data -l ",
                                    dir_, "/log -w -t 60 ", args));
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("pg_ctl ", args, " failed: ", rc));
  }
  return absl::OkStatus();
}

absl::Status PostgresServer::StartAgain() {
  // The same port every time, so clients reconnect to a restarted server.
  absl::Status s =
      PgCtl(absl::StrCat("-o \"-c listen_addresses=127.0.0.1 -p ", port_,
                         " -c unix_socket_directories=", dir_,
                         " -c fsync=off -c max_connections=200\" start"));
  running_ = s.ok();
  return s;
}

absl::Status PostgresServer::Stop(const std::string& mode) {
  if (!running_) return absl::OkStatus();
  absl::Status s = PgCtl(absl::StrCat("-m ", mode, " stop"));
  if (s.ok()) running_ = false;
  return s;
}

PostgresServer::~PostgresServer() {
  (void)Stop("immediate");
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string PostgresServer::Conninfo(const std::string& database) const {
  return absl::StrCat("host=127.0.0.1 port=", port_, " dbname=", database,
                      " user=postgres password=", kPassword,
                      " connect_timeout=10");
}

std::string PostgresServer::CreateDatabase(const std::string& name) {
  absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
      storage::PgConnection::Connect(Conninfo(), absl::Seconds(10));
  EXPECT_TRUE(db.ok()) << db.status();
  if (db.ok()) {
    absl::StatusOr<storage::PgResult> r =
        (*db)->Exec(absl::StrCat("CREATE DATABASE \"", name, "\""));
    EXPECT_TRUE(r.ok()) << r.status();
  }
  return Conninfo(name);
}

absl::Status PostgresServer::Install(const std::string& from,
                                     const std::string& name) {
  const std::string to = absl::StrCat(dir_, "/data/", name);
  std::error_code ec;
  std::filesystem::copy_file(
      from, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("copy ", from, ": ", ec.message()));
  if (geteuid() == 0) {
    const passwd* user = getpwnam("postgres");
    if (user == nullptr || chown(to.c_str(), user->pw_uid, user->pw_gid) != 0) {
      return absl::InternalError(absl::StrCat("chown ", to));
    }
  }
  std::filesystem::permissions(
      to,
      std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
      ec);
  return ec ? absl::InternalError(absl::StrCat("chmod ", to))
            : absl::OkStatus();
}

absl::Status PostgresServer::EnableTls(const std::string& cert_file,
                                       const std::string& key_file,
                                       const std::string& client_ca_file,
                                       const std::string& cert_user) {
  for (const auto& [from, name] :
       {std::pair{cert_file, "server.crt"}, std::pair{key_file, "server.key"},
        std::pair{client_ca_file, "root.crt"}}) {
    if (absl::Status s = Install(from, name); !s.ok()) return s;
  }
  {
    absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
        storage::PgConnection::Connect(Conninfo(), absl::Seconds(10));
    if (!db.ok()) return db.status();
    absl::StatusOr<storage::PgResult> r = (*db)->Exec(
        absl::StrCat("CREATE ROLE \"", cert_user, "\" LOGIN SUPERUSER"));
    if (!r.ok()) return r.status();
  }
  std::ofstream(dir_ + "/data/postgresql.conf", std::ios::app)
      << "ssl = on\nssl_cert_file = 'server.crt'\n"
         "ssl_key_file = 'server.key'\nssl_ca_file = 'root.crt'\n";
  // Read first to last: the certificate user by certificate, over TLS.
  const std::string hba_path = dir_ + "/data/pg_hba.conf";
  std::ifstream in(hba_path);
  std::stringstream hba;
  hba << "hostssl all \"" << cert_user << "\" 127.0.0.1/32 cert\n"
      << in.rdbuf();
  in.close();
  std::ofstream(hba_path, std::ios::trunc) << hba.str();
  return Restart();
}

absl::Status MigrateSchema(const std::string& conninfo) {
  absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
      storage::PgConnection::Connect(conninfo, absl::Seconds(10));
  if (!db.ok()) return db.status();
  return storage::MigrateSchema(**db).status();
}

std::string PostgresServer::Log() const {
  std::ifstream in(dir_ + "/log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace granary::testing
