#include "bench/postgres_db.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/postgres_grain_storage.h"
#include "storage/postgres/schema.h"

namespace granary::bench {

absl::Status MigrateBenchDatabase(const std::string& conninfo) {
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<storage::PgConnection> db,
                           storage::PgConnection::Connect(
                               conninfo, absl::Seconds(10), absl::Seconds(60)));
  GRANARY_ASSIGN_OR_RETURN(std::vector<int> applied,
                           storage::MigrateSchema(*db));
  if (!applied.empty()) {
    std::printf("ENV migrated=%s\n", absl::StrJoin(applied, ",").c_str());
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

absl::Status DeleteBenchCluster(const std::string& conninfo,
                                const std::string& cluster_id) {
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<storage::PgConnection> db,
                           storage::PgConnection::Connect(
                               conninfo, absl::Seconds(10), absl::Seconds(60)));
  // Every Granary table keyed by cluster, whatever the schema version.
  GRANARY_ASSIGN_OR_RETURN(
      storage::PgResult tables,
      db->Exec("SELECT table_name FROM information_schema.columns "
               "WHERE table_schema = current_schema() "
               "AND column_name = 'cluster_id' "
               "AND table_name LIKE 'granary\\_%' ORDER BY table_name"));
  for (int i = 0; i < tables.rows(); ++i) {
    // The name comes from the catalog and matches granary_*: no quoting
    // beyond the identifier's.
    GRANARY_RETURN_IF_ERROR(
        db->Exec(absl::StrCat("DELETE FROM \"", tables.Text(i, 0),
                              "\" WHERE cluster_id = $1"),
                 {cluster_id})
            .status());
  }
  return absl::OkStatus();
}

absl::Status WriteSecretFile(const std::string& path,
                             const std::string& contents) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  const std::string line = contents + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      close(fd);
      return absl::UnavailableError(
          absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BenchPostgresStorage>>
BenchPostgresStorage::Open(const std::string& conninfo,
                           const std::string& cluster_id, int connections) {
  auto s = std::unique_ptr<BenchPostgresStorage>(new BenchPostgresStorage);
  s->conninfo_ = conninfo;
  s->cluster_id_ = cluster_id;
  storage::PgPoolOptions options;
  options.conninfo = conninfo;
  options.connections = connections;
  GRANARY_RETURN_IF_ERROR(storage::ValidatePgPoolOptions(options));
  s->pool_ = std::make_unique<storage::PgPool>(options);
  GRANARY_RETURN_IF_ERROR(s->pool_->Start());
  s->storage_ = std::make_unique<storage::PostgresGrainStorage>(s->pool_.get(),
                                                                cluster_id);
  return s;
}

void BenchPostgresStorage::Close() {
  if (closed_) return;
  closed_ = true;
  storage_.reset();
  if (pool_ != nullptr) pool_->Stop();
  if (absl::Status s = DeleteBenchCluster(conninfo_, cluster_id_); !s.ok()) {
    std::fprintf(stderr,
                 "granary-bench: could not delete the rows of cluster %s: "
                 "%s\n",
                 cluster_id_.c_str(), s.ToString().c_str());
  }
}

}  // namespace granary::bench
