// The providers a silo host knows by default (silo/silo_host_options.h), and
// the checks of its options.
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "silo/admin/http_server.h"
#include "silo/cluster/cluster_provider.h"
#include "silo/cluster/dev_cluster.h"
#include "silo/silo_host_options.h"
#include "storage/memory_storage.h"
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

absl::StatusOr<std::unique_ptr<ClusterProvider>> DevCluster(
    const SiloHostOptions& o) {
  return MakeDevClusterProvider(o.cluster, o.primary);
}

bool IsHostPort(const std::string& value) {
  std::string host;
  int port = 0;
  return SplitHostPort(value, &host, &port);
}

}  // namespace

Providers DefaultProviders() {
  Providers p;
  p.storage["rocksdb"] = OpenRocksDb;
  p.storage["memory"] = InMemory;
  p.cluster["local"] = DevCluster;
  p.cluster["dev"] = DevCluster;
  return p;
}

absl::Status ValidateSiloHostOptions(const SiloHostOptions& o) {
  const absl::Duration slow_turn = o.slow_turn_threshold;
  if (slow_turn <= absl::ZeroDuration() ||
      slow_turn == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "--slow_turn_threshold must be positive and finite");
  }
  if (o.workers < 0) {
    return absl::InvalidArgumentError("--workers must not be negative");
  }
  if (o.turn_budget < 1) {
    return absl::InvalidArgumentError("--turn_budget must be at least 1");
  }
  if (o.max_message_bytes < 1) {
    return absl::InvalidArgumentError("--max_message_bytes must be positive");
  }
  if (o.max_in_flight < 1) {
    return absl::InvalidArgumentError("--max_in_flight must be positive");
  }
  if (o.min_reminder_period < absl::Milliseconds(1) ||
      o.min_reminder_period == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        "--min_reminder_period must be at least 1ms and finite");
  }
  for (const auto& [name, value] : {std::pair{"--gateway", &o.gateway},
                                    std::pair{"--silo", &o.silo},
                                    std::pair{"--http", &o.http}}) {
    if (!IsHostPort(*value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "='", *value, "' is not HOST:PORT"));
    }
  }
  std::string host;
  int port = 0;
  SplitHostPort(o.http, &host, &port);
  if (!IsLoopbackHost(host) && !o.http_allow_remote) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http='", o.http,
        "' is not a loopback address; the endpoint serves metrics and the "
        "dashboard without authentication, so pass --http_allow_remote to "
        "expose it"));
  }
  if (!o.providers.storage.contains(o.storage)) {
    return absl::InvalidArgumentError("--storage must be rocksdb or memory");
  }
  if (o.durability != "sync" && o.durability != "async") {
    return absl::InvalidArgumentError("--durability must be sync or async");
  }
  if (!o.providers.cluster.contains(o.cluster)) {
    return absl::InvalidArgumentError("--cluster must be local or dev");
  }
  if (o.cluster == "local" && !o.primary.empty()) {
    return absl::InvalidArgumentError("--primary needs --cluster=dev");
  }
  if (!o.primary.empty() && !IsHostPort(o.primary)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--primary='", o.primary, "' is not HOST:PORT"));
  }
  if (!o.silo_advertise.empty() &&
      (!SplitHostPort(o.silo_advertise, &host, &port) || port == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--silo_advertise='", o.silo_advertise,
                     "' is not HOST:PORT with a port from 1 to 65535"));
  }
  if (o.join_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--join_timeout must be positive");
  }
  return absl::OkStatus();
}

}  // namespace granary::silo
