#include "bench/hosted_arm.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/lifecycle.h"
#include "bench/postgres_db.h"
#include "bench/postgres_floor.h"
#include "core/status.h"
#include "examples/bench_grain.h"
#include "examples/chat_grain.h"
#include "silo/runtime/runtime.h"
#include "silo/silo_host.h"
#include "storage/memory_storage.h"

namespace granary::bench {
namespace {

// A silo in this process.
class HostedArm final : public Arm {
 public:
  explicit HostedArm(const RunConfig& c) : config_(c) {}
  // After a Start that failed half-way: the silo stops before its storage.
  ~HostedArm() override {
    StopTwins();
    if (host_ != nullptr) host_->Stop();
  }

  absl::Status Start(ScenarioContext* ctx) override {
    if (config_.wants_floor) {
      const std::string pgbench =
          config_.pgbench.empty() ? FindPgbench() : config_.pgbench;
      absl::StatusOr<std::unique_ptr<PostgresFloor>> floor =
          PostgresFloor::Prepare(config_.conninfo, pgbench);
      if (!floor.ok()) return floor.status();
      floor_ = *std::move(floor);
      ctx->postgres_floor = floor_.get();
    }
    options_.workers = config_.workers;
    options_.turn_budget = config_.turn_budget;
    options_.idle_spin = config_.idle_spin;
    options_.gateway = "";  // the benchmark calls the runtime in process
    options_.http = "";
    GRANARY_RETURN_IF_ERROR(OpenStorage());
    host_ =
        std::make_unique<silo::SiloHost>(options_, Environment("bench-silo"));
    host_->AddGrains([this](silo::Runtime& silo) -> absl::Status {
      GRANARY_RETURN_IF_ERROR(AddBenchGrains(silo, &stats_, &state_stats_));
      return silo.AddGrain<examples::ChatGrain>();  // push
    });
    GRANARY_RETURN_IF_ERROR(host_->Start());
    silo_ = host_->silo();
    lifecycle_ = std::make_unique<HostedLifecycle>(&stats_);
    state_lifecycle_ = std::make_unique<HostedLifecycle>(&state_stats_);
    ctx->invoker = silo_;
    if (config_.wants_filtered) {
      GRANARY_RETURN_IF_ERROR(StartTwin("bench-silo-unfiltered",
                                        /*with_filters=*/false, unfiltered_));
      GRANARY_RETURN_IF_ERROR(StartTwin("bench-silo-filtered",
                                        /*with_filters=*/true, filtered_));
      ctx->unfiltered_invoker = unfiltered_.host->silo();
      ctx->filtered_invoker = filtered_.host->silo();
    }
    ctx->lifecycle = lifecycle_.get();
    ctx->state_lifecycle = state_lifecycle_.get();
    return absl::OkStatus();
  }

  void Finish(const RunConfig& c, Report& report) override {
    std::printf(
        "ENV mode=%s workers=%d turn_budget=%d idle_spin=%d "
        "concurrency=%d scale=%g rounds=%d warmup=%d\n",
        c.mode.c_str(), silo_->internals().scheduler().workers(),
        options_.turn_budget, options_.idle_spin, c.concurrency, c.scale,
        c.rounds, c.warmup);
    report.SetEnv("workers",
                  absl::StrCat(silo_->internals().scheduler().workers()));
    report.SetEnv("turn_budget", absl::StrCat(options_.turn_budget));
    report.SetEnv("storage", c.storage);
    if (pg_storage_ != nullptr) {
      std::printf("ENV storage=postgres cluster_id=%s\n",
                  pg_storage_->cluster_id().c_str());
      report.SetEnv("cluster_id", pg_storage_->cluster_id());
    }
    if (floor_ != nullptr) {
      std::printf("ENV postgres_version=%s fsync=%s synchronous_commit=%s\n",
                  floor_->server_version().c_str(), floor_->fsync().c_str(),
                  floor_->synchronous_commit().c_str());
      report.SetEnv("postgres_version", floor_->server_version());
      report.SetEnv("fsync", floor_->fsync());
      report.SetEnv("synchronous_commit", floor_->synchronous_commit());
    }
    StopTwins();
    for (Twin* twin : {&filtered_, &unfiltered_}) twin->host.reset();
    host_->Stop();
    host_.reset();
    silo_ = nullptr;
    if (pg_storage_ != nullptr) pg_storage_->Close();
    floor_.reset();
    if (!storage_dir_.empty()) std::filesystem::remove_all(storage_dir_);
  }

 private:
  // The silos of the filter scenarios, built alike: the same options and
  // grains as the main silo, memory storage (those scenarios store nothing),
  // and, for `*_filtered`, an empty filter chain: one incoming and one
  // outgoing filter that pass the call. The unfiltered twin is the filter
  // goal's baseline, so that the goal compares two silos that differ only in
  // their filters.
  struct Twin {
    std::unique_ptr<silo::SiloHost> host;
    BenchStats stats, state_stats;
  };

  absl::Status StartTwin(const char* name, bool with_filters, Twin& twin) {
    silo::SiloHostOptions options = options_;
    options.storage = "memory";
    twin.host = std::make_unique<silo::SiloHost>(options, Environment(name));
    twin.host->AddGrains([&twin](silo::Runtime& silo) {
      return AddBenchGrains(silo, &twin.stats, &twin.state_stats);
    });
    if (with_filters) {
      auto pass = [](silo::CallFilterContext&) -> Task<absl::Status> {
        co_return absl::OkStatus();
      };
      twin.host->AddIncomingFilter(pass);
      twin.host->AddOutgoingFilter(pass);
    }
    return twin.host->Start();
  }

  void StopTwins() {
    if (filtered_.host != nullptr) filtered_.host->Stop();
    if (unfiltered_.host != nullptr) unfiltered_.host->Stop();
  }

  // A silo of this process named `id`, with the run's PostgreSQL store as
  // the provider "bench-postgres".
  silo::SiloEnvironment Environment(const std::string& id) {
    silo::SiloEnvironment env;
    env.in_process = silo::InProcessNetwork::Alone(id);
    if (pg_storage_ != nullptr) {
      storage::GrainStorage* store = pg_storage_->storage();
      env.providers.storage["bench-postgres"] =
          [store](const silo::SiloHostOptions&)
          -> absl::StatusOr<silo::StorageStores> {
        silo::StorageStores stores;
        stores.grain_state = std::shared_ptr<storage::GrainStorage>(
            store, [](storage::GrainStorage*) {});  // the arm's
        stores.reminders = std::make_shared<storage::MemoryReminderTable>();
        return stores;
      };
    }
    return env;
  }

  // The main silo's grain storage: the `memory` provider, the run's
  // PostgreSQL database, or (the default) the `rocksdb` provider with sync
  // writes in a fresh temporary directory.
  absl::Status OpenStorage() {
    const std::string& kind = config_.storage;
    if (kind == "memory") {
      options_.storage = "memory";
      return absl::OkStatus();
    }
    if (kind == "postgres") {
      GRANARY_RETURN_IF_ERROR(MigrateBenchDatabase(config_.conninfo));
      // A cluster of this run's own: no row of another run is read.
      GRANARY_ASSIGN_OR_RETURN(
          pg_storage_,
          BenchPostgresStorage::Open(
              config_.conninfo,
              absl::StrCat("bench-", getpid(), "-",
                           absl::Hex(absl::GetCurrentTimeNanos()))));
      options_.storage = "bench-postgres";
      return absl::OkStatus();
    }
    storage_dir_ = (std::filesystem::temp_directory_path() /
                    absl::StrCat("granary-bench-", getpid()))
                       .string();
    std::filesystem::remove_all(storage_dir_);
    options_.storage = "rocksdb";
    options_.data_dir = storage_dir_;
    options_.durability = "sync";
    return absl::OkStatus();
  }

  const RunConfig& config_;
  silo::SiloHostOptions options_;
  std::unique_ptr<silo::SiloHost> host_;
  silo::Runtime* silo_ = nullptr;  // host_'s runtime
  BenchStats stats_, state_stats_;
  Twin unfiltered_, filtered_;
  std::string storage_dir_;
  std::unique_ptr<BenchPostgresStorage> pg_storage_;
  std::unique_ptr<PostgresFloor> floor_;
  std::unique_ptr<HostedLifecycle> lifecycle_, state_lifecycle_;
};

}  // namespace

std::unique_ptr<Arm> MakeHostedArm(const RunConfig& config) {
  return std::make_unique<HostedArm>(config);
}

}  // namespace granary::bench
