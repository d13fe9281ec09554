// The providers a silo host knows by default (silo/silo_host_options.h), and
// the checks of its options.
#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "directory/hash_ring.h"
#include "rpc/credentials.h"
#include "silo/admin/http_server.h"
#include "silo/cluster/cluster_provider.h"
#include "silo/cluster/dev_cluster.h"
#include "silo/cluster/membership_agent.h"
#include "silo/cluster/postgres_cluster.h"
#include "silo/silo_environment.h"
#include "silo/silo_host_options.h"
#include "storage/memory_storage.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/pg_pool.h"
#include "storage/postgres/postgres_grain_storage.h"
#include "storage/postgres/postgres_membership_table.h"
#include "storage/postgres/postgres_reminder_table.h"
#include "storage/rocksdb_storage.h"

namespace granary::silo {
namespace {

// Grain state and reminders in one RocksDB database under data_dir; the
// directory is opened (and locked) here, before any listener, so a second
// silo on it fails before taking ports.
absl::StatusOr<StorageStores> OpenRocksDb(const SiloHostOptions& o) {
  if (o.durability != "sync" && o.durability != "async") {
    return absl::InvalidArgumentError("--durability must be sync or async");
  }
  std::error_code ec;
  std::filesystem::create_directories(o.data_dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot create --data_dir '", o.data_dir, "': ", ec.message()));
  }
  storage::RocksDbOptions options;
  options.data_dir = o.data_dir;
  options.durability = o.durability == "sync" ? storage::Durability::kSync
                                              : storage::Durability::kAsync;
  absl::StatusOr<std::unique_ptr<storage::RocksDbStorage>> opened =
      storage::RocksDbStorage::Open(options);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<storage::RocksDbStorage> db = *std::move(opened);
  return StorageStores{db, db};
}

absl::StatusOr<StorageStores> InMemory(const SiloHostOptions&) {
  return StorageStores{std::make_shared<storage::MemoryStorage>(),
                       std::make_shared<storage::MemoryReminderTable>()};
}

// Grain state and reminders in PostgreSQL, on a pool of their own
// (--postgres_connections) that the two stores share and keep alive.
absl::StatusOr<StorageStores> OpenPostgresStores(const SiloHostOptions& o) {
  GRANARY_ASSIGN_OR_RETURN(
      std::string conninfo,
      storage::ResolveConninfo(o.postgres, o.postgres_file));
  GRANARY_RETURN_IF_ERROR(storage::ValidateClusterId(o.cluster_id));
  // The cluster provider checked the database already when it is postgres.
  if (o.cluster != "postgres") {
    GRANARY_RETURN_IF_ERROR(OpenPostgres(conninfo, o.join_timeout));
  }
  struct Owner {
    explicit Owner(storage::PgPoolOptions options) : pool(std::move(options)) {}
    storage::PgPool pool;
    std::unique_ptr<storage::PostgresGrainStorage> state;
    std::unique_ptr<storage::PostgresReminderTable> reminders;
  };
  storage::PgPoolOptions pool;
  pool.conninfo = conninfo;
  pool.connections = o.postgres_connections;
  auto owner = std::make_shared<Owner>(pool);
  GRANARY_RETURN_IF_ERROR(owner->pool.Start());
  owner->state = std::make_unique<storage::PostgresGrainStorage>(&owner->pool,
                                                                 o.cluster_id);
  owner->reminders = std::make_unique<storage::PostgresReminderTable>(
      &owner->pool, o.cluster_id, [](const GrainId& id) {
        return static_cast<int64_t>(directory::GrainHash(id));
      });
  // The stores share the owner: the pool stops with the last of them.
  return StorageStores{
      std::shared_ptr<storage::GrainStorage>(owner, owner->state.get()),
      std::shared_ptr<storage::ReminderTable>(owner, owner->reminders.get())};
}

// The rules the table applies to votes: the same as this silo's agent.
storage::VoteRules ClusterVoteRules(const SiloHostOptions& o) {
  MembershipOptions m;
  m.votes_to_kill = o.votes_to_kill;
  return m.vote_rules();
}

absl::StatusOr<std::unique_ptr<ClusterProvider>> PostgresClusterFactory(
    const SiloHostOptions& o) {
  PostgresClusterOptions options;
  GRANARY_ASSIGN_OR_RETURN(
      options.conninfo, storage::ResolveConninfo(o.postgres, o.postgres_file));
  options.cluster_id = o.cluster_id;
  options.dead_retention = o.dead_retention;
  options.wait = o.join_timeout;
  options.vote_rules = ClusterVoteRules(o);
  return MakePostgresClusterProvider(options);
}

absl::StatusOr<std::unique_ptr<ClusterProvider>> DevCluster(
    const SiloHostOptions& o) {
  return MakeDevClusterProvider(o.cluster, o.primary, ClusterClientSecurity(o),
                                ClusterVoteRules(o), o.dead_retention);
}

// "a, b or c": the names of `providers`, in order.
template <typename Map>
std::string Names(const Map& providers) {
  std::vector<std::string> names;
  for (const auto& [name, factory] : providers) names.push_back(name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) absl::StrAppend(&out, i + 1 == names.size() ? " or " : ", ");
    absl::StrAppend(&out, names[i]);
  }
  return out;
}

}  // namespace

Providers DefaultProviders() {
  Providers p;
  p.storage["rocksdb"] = OpenRocksDb;
  p.storage["memory"] = InMemory;
  p.storage["postgres"] = OpenPostgresStores;
  p.cluster["local"] = DevCluster;
  p.cluster["dev"] = DevCluster;
  p.cluster["postgres"] = PostgresClusterFactory;
  return p;
}

absl::Status CheckProviderNames(const SiloHostOptions& o,
                                const Providers& providers) {
  const std::string storage = EffectiveStorage(o);
  if (!providers.storage.contains(storage)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--storage must be ", Names(providers.storage), ", not '",
                     absl::CHexEscape(storage.substr(0, 64)), "'"));
  }
  if (!providers.cluster.contains(o.cluster)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cluster must be ", Names(providers.cluster), ", not '",
                     absl::CHexEscape(o.cluster.substr(0, 64)), "'"));
  }
  return absl::OkStatus();
}

}  // namespace granary::silo
