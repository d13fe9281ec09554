// File: bench/postgres_db.h
// -----------------------------------------------------------------------------
// The benchmark's PostgreSQL database (granary-bench --storage=postgres and
// --failover --cluster=postgres): migrating it once before a run, a grain
// storage of a cluster of its own for one run, and removing a cluster's rows
// afterwards, so runs against one database never see each other's rows.
//
//   GRANARY_RETURN_IF_ERROR(MigrateBenchDatabase(conninfo));
//   GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<BenchPostgresStorage> s,
//                            BenchPostgresStorage::Open(conninfo, "bench-1"));
//   options.storage = s->storage();
//   ...
//   s->Close();                 // stops the pool, deletes bench-1's rows
//
// Threading: storage() is thread-safe (storage/postgres/); Open and Close
// run on one thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/grain_storage.h"
#include "storage/postgres/pg_pool.h"

namespace granary::bench {

// Applies the schema's missing migrations (storage::MigrateSchema); the
// versions applied are printed as an `ENV migrated=...` line when any were.
absl::Status MigrateBenchDatabase(const std::string& conninfo);

// Deletes every row of `cluster_id` from the Granary tables.
absl::Status DeleteBenchCluster(const std::string& conninfo,
                                const std::string& cluster_id);

// Writes `contents` to `path`, readable by this user only (mode 0600), for
// a secret that must not be on a command line. The file must not exist.
absl::Status WriteSecretFile(const std::string& path,
                             const std::string& contents);

class BenchPostgresStorage {
 public:
  // A started pool of `connections` to `conninfo` and the grain storage of
  // `cluster_id` on it.
  static absl::StatusOr<std::unique_ptr<BenchPostgresStorage>> Open(
      const std::string& conninfo, const std::string& cluster_id,
      int connections = 4);
  ~BenchPostgresStorage() { Close(); }

  storage::GrainStorage* storage() const { return storage_.get(); }
  const std::string& cluster_id() const { return cluster_id_; }

  // Stops the pool and deletes the cluster's rows; idempotent.
  void Close();

 private:
  BenchPostgresStorage() = default;

  std::string conninfo_;
  std::string cluster_id_;
  std::unique_ptr<storage::PgPool> pool_;
  std::unique_ptr<storage::GrainStorage> storage_;
  bool closed_ = false;
};

}  // namespace granary::bench
