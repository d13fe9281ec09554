// granary-silo: a silo hosting the example grains (Counter, Ping, BankAccount
// with its state and Alarm with its reminders in RocksDB under --data_dir)
// and the
// benchmark grain (granary.bench.BenchGrain) that granary-bench drives. It is also the example of
// how to build a silo for your own grains: register them, start the silo,
// then its listeners.
//
//   granary-silo --gateway=127.0.0.1:30000 --http=127.0.0.1:8080
//   granary-silo --config=silo.flags     # the same flags, one per line
//
// When every listener is bound it prints exactly one line to stdout:
//   READY gateway=HOST:PORT silo=HOST:PORT http=HOST:PORT
// SIGTERM or SIGINT shuts down gracefully (grains deactivate, calls still
// queued are answered UNAVAILABLE) and exits 0; a second signal exits at once.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/address.h"
#include "core/log.h"
#include "client/grpc_callback_queue.h"
#include "examples/bench_grain.h"
#include "examples/counter_grain.h"
#include "grpcpp/grpcpp.h"
#include "silo/cluster_router.h"
#include "silo/reminder_remote.h"
#include "silo/directory_service.h"
#include "silo/gateway_server.h"
#include "silo/silo_transport.h"
#include "silo/storage_service.h"
#include "silo/admin_http.h"
#include "silo/gateway_service.h"
#include "silo/membership_agent.h"
#include "silo/membership_service.h"
#include "silo/http_server.h"
#include "silo/silo.h"
#include "storage/memory_storage.h"
#include "storage/rocksdb_storage.h"

ABSL_FLAG(std::string, gateway, "127.0.0.1:30000",
          "HOST:PORT of the gateway clients connect to (port 0: any free port).");
ABSL_FLAG(std::string, silo, "127.0.0.1:11111",
          "HOST:PORT of the silo-to-silo endpoint (port 0: any free port).");
ABSL_FLAG(std::string, silo_advertise, "",
          "HOST:PORT at which the other silos reach this silo's endpoint, when "
          "not --silo (behind a proxy, NAT or a container's port mapping). "
          "It names the silo in the membership table.");
ABSL_FLAG(std::string, http, "127.0.0.1:8080",
          "HOST:PORT of the HTTP endpoint (port 0: any free port).");
ABSL_FLAG(std::string, data_dir, "./granary-data",
          "Directory for this silo's data; created if missing.");
ABSL_FLAG(int32_t, workers, 0, "Worker threads (0: hardware threads).");
ABSL_FLAG(int32_t, turn_budget, 64,
          "Messages one activation processes per scheduling.");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error.");
ABSL_FLAG(std::string, log_format, "text",
          "text (one line per event: time, level, key=value fields, message) "
          "or json (one JSON object per line).");
ABSL_FLAG(absl::Duration, slow_turn_threshold, absl::Milliseconds(100),
          "A turn holding a worker longer than this is logged (with its grain "
          "and method) and counted in granary_slow_turns_total.");
ABSL_FLAG(bool, http_allow_remote, false,
          "Allow --http on a non-loopback address (it serves metrics and the "
          "dashboard without authentication).");
ABSL_FLAG(int32_t, max_message_bytes, 4 << 20,
          "Largest message the gateway accepts or sends.");
ABSL_FLAG(int32_t, max_in_flight, 16384,
          "Unfinished calls per client connection past which the gateway "
          "stops reading it (gRPC flow control then holds the client back).");
ABSL_FLAG(std::string, storage, "rocksdb",
          "Where grain state and reminders live: rocksdb (in --data_dir; "
          "survives restarts "
          "and kill -9) or memory (lost when the silo stops).");
ABSL_FLAG(std::string, durability, "sync",
          "RocksDB writes: sync (an acknowledged write survives power loss) "
          "or async (survives a crash of the process, not of the machine).");
ABSL_FLAG(absl::Duration, min_reminder_period, absl::Seconds(1),
          "The shortest period a grain may give a durable reminder "
          "(e.g. 1s, 500ms, 1m).");
ABSL_FLAG(std::string, cluster, "local",
          "local (this silo alone) or dev (a cluster on one host: the silo "
          "without --primary hosts the membership table, the others name its "
          "--silo endpoint with --primary).");
ABSL_FLAG(std::string, primary, "",
          "With --cluster=dev: HOST:PORT of the primary's silo endpoint.");
ABSL_FLAG(absl::Duration, probe_interval, absl::Seconds(1),
          "How often a silo probes the silos after it on the ring.");
ABSL_FLAG(absl::Duration, probe_timeout, absl::Milliseconds(500),
          "How long a probe may take before it counts as missed.");
ABSL_FLAG(int32_t, missed_probes, 2,
          "Consecutive missed probes after which a silo votes the other dead.");
ABSL_FLAG(int32_t, votes_to_kill, 2,
          "Fresh votes that declare a silo dead (fewer when fewer silos are "
          "alive to vote).");
ABSL_FLAG(absl::Duration, join_timeout, absl::Seconds(30),
          "How long to keep trying to join the cluster (reach the primary) "
          "before giving up.");
ABSL_FLAG(std::string, config, "",
          "A file of these flags, one --name=value per line (# comments).");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "granary-silo: %s\n", message.c_str());
  return 2;
}

// `--config=FILE` is read as an Abseil flag file; command-line flags after
// it override its values.
std::vector<char*> WithConfigAsFlagfile(int argc, char** argv,
                                        std::vector<std::string>* storage) {
  storage->reserve(argc);
  std::vector<char*> out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (absl::StartsWith(arg, "--config=")) {
      arg = "--flagfile=" + arg.substr(9);
    } else if (arg == "--config" && i + 1 < argc) {
      arg = std::string("--flagfile=") + argv[++i];
    }
    storage->push_back(std::move(arg));
    out.push_back(storage->back().data());
  }
  return out;
}

int Main() {
  using granary::silo::GatewayServer;
  using granary::silo::HttpServer;
  using granary::silo::Silo;

  granary::LogLevel level;
  if (!granary::ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    return Fail("--log_level must be debug, info, warning or error");
  }
  granary::SetLogLevel(level);
  granary::LogFormat log_format;
  if (!granary::ParseLogFormat(absl::GetFlag(FLAGS_log_format), &log_format)) {
    return Fail("--log_format must be text or json");
  }
  granary::SetLogFormat(log_format);
  const absl::Duration slow_turn = absl::GetFlag(FLAGS_slow_turn_threshold);
  if (slow_turn <= absl::ZeroDuration() ||
      slow_turn == absl::InfiniteDuration()) {
    return Fail("--slow_turn_threshold must be positive and finite");
  }
  if (absl::GetFlag(FLAGS_workers) < 0) return Fail("--workers must not be negative");
  if (absl::GetFlag(FLAGS_turn_budget) < 1) return Fail("--turn_budget must be at least 1");
  if (absl::GetFlag(FLAGS_max_message_bytes) < 1) {
    return Fail("--max_message_bytes must be positive");
  }
  if (absl::GetFlag(FLAGS_max_in_flight) < 1) {
    return Fail("--max_in_flight must be positive");
  }
  const absl::Duration min_reminder_period =
      absl::GetFlag(FLAGS_min_reminder_period);
  if (min_reminder_period < absl::Milliseconds(1) ||
      min_reminder_period == absl::InfiniteDuration()) {
    return Fail("--min_reminder_period must be at least 1ms and finite");
  }
  std::string host;
  int port;
  for (const auto& [name, value] :
       {std::pair{"--gateway", absl::GetFlag(FLAGS_gateway)},
        std::pair{"--silo", absl::GetFlag(FLAGS_silo)},
        std::pair{"--http", absl::GetFlag(FLAGS_http)}}) {
    if (!granary::SplitHostPort(value, &host, &port)) {
      return Fail(absl::StrCat(name, "='", value, "' is not HOST:PORT"));
    }
  }
  granary::SplitHostPort(absl::GetFlag(FLAGS_http), &host, &port);
  if (!granary::silo::IsLoopbackHost(host) &&
      !absl::GetFlag(FLAGS_http_allow_remote)) {
    return Fail(absl::StrCat(
        "--http='", absl::GetFlag(FLAGS_http),
        "' is not a loopback address; the endpoint serves metrics and the "
        "dashboard without authentication, so pass --http_allow_remote to "
        "expose it"));
  }
  // Signals are taken by sigwait below, never by a handler on some thread.
  // Blocked before any thread exists (storage starts threads), so every
  // thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string storage_kind = absl::GetFlag(FLAGS_storage);
  const std::string durability = absl::GetFlag(FLAGS_durability);
  if (storage_kind != "rocksdb" && storage_kind != "memory") {
    return Fail("--storage must be rocksdb or memory");
  }
  if (durability != "sync" && durability != "async") {
    return Fail("--durability must be sync or async");
  }
  std::error_code ec;
  std::filesystem::create_directories(absl::GetFlag(FLAGS_data_dir), ec);
  if (ec) {
    return Fail(absl::StrCat("cannot create --data_dir '",
                             absl::GetFlag(FLAGS_data_dir), "': ", ec.message()));
  }
  // Grain state: the data directory is opened (and locked) before any
  // listener, so a second silo on it fails before taking ports.
  // Membership: which table, and the options of failure detection.
  const std::string cluster = absl::GetFlag(FLAGS_cluster);
  const std::string primary = absl::GetFlag(FLAGS_primary);
  if (cluster != "local" && cluster != "dev") {
    return Fail("--cluster must be local or dev");
  }
  if (cluster == "local" && !primary.empty()) {
    return Fail("--primary needs --cluster=dev");
  }
  if (!primary.empty() && !granary::SplitHostPort(primary, &host, &port)) {
    return Fail(absl::StrCat("--primary='", primary, "' is not HOST:PORT"));
  }
  const std::string advertise = absl::GetFlag(FLAGS_silo_advertise);
  if (!advertise.empty() &&
      (!granary::SplitHostPort(advertise, &host, &port) || port == 0)) {
    return Fail(absl::StrCat("--silo_advertise='", advertise,
                             "' is not HOST:PORT with a port from 1 to 65535"));
  }
  const absl::Duration join_timeout = absl::GetFlag(FLAGS_join_timeout);
  if (join_timeout <= absl::ZeroDuration()) {
    return Fail("--join_timeout must be positive");
  }
  granary::silo::MembershipOptions membership_options;
  membership_options.probe_interval = absl::GetFlag(FLAGS_probe_interval);
  membership_options.probe_timeout = absl::GetFlag(FLAGS_probe_timeout);
  membership_options.missed_probes = absl::GetFlag(FLAGS_missed_probes);
  membership_options.votes_to_kill = absl::GetFlag(FLAGS_votes_to_kill);
  membership_options.table_host = primary;
  if (cluster == "dev") {
    // Grain code runs only while the table confirms this silo (see
    // MembershipOptions::lease).
    membership_options.lease = granary::silo::SafeLease(membership_options);
  }
  if (absl::Status s =
          granary::silo::ValidateMembershipOptions(membership_options);
      !s.ok()) {
    return Fail(absl::StrCat("membership options: ", s.message()));
  }
  std::unique_ptr<granary::storage::InMemoryMembershipTable> local_table;
  std::unique_ptr<granary::silo::RemoteMembershipTable> remote_table;
  granary::storage::MembershipTable* table = nullptr;
  std::unique_ptr<granary::silo::MembershipService> membership_service;
  if (primary.empty()) {
    local_table = std::make_unique<granary::storage::InMemoryMembershipTable>();
    table = local_table.get();
    if (cluster == "dev") {
      membership_service =
          std::make_unique<granary::silo::MembershipService>(local_table.get());
    }
  } else {
    remote_table = std::make_unique<granary::silo::RemoteMembershipTable>(primary);
    table = remote_table.get();
  }

  std::unique_ptr<granary::storage::GrainStorage> storage;
  std::unique_ptr<granary::storage::MemoryReminderTable> memory_reminders;
  granary::storage::ReminderTable* reminders = nullptr;
  if (storage_kind == "rocksdb") {
    granary::storage::RocksDbOptions storage_options;
    storage_options.data_dir = absl::GetFlag(FLAGS_data_dir);
    storage_options.durability = durability == "sync"
                                     ? granary::storage::Durability::kSync
                                     : granary::storage::Durability::kAsync;
    auto opened = granary::storage::RocksDbStorage::Open(storage_options);
    if (!opened.ok()) return Fail(opened.status().ToString());
    reminders = opened->get();  // grain state and reminders in one database
    storage = *std::move(opened);
  } else {
    storage = std::make_unique<granary::storage::MemoryStorage>();
    memory_reminders = std::make_unique<granary::storage::MemoryReminderTable>();
    reminders = memory_reminders.get();
  }


  // The silo-to-silo endpoint: liveness probes, the membership table on a
  // dev cluster's primary, the gateway protocol for calls from other silos
  // (attached to the silo once it exists), and the standard health service.
  granary::HoldGrpcCallbackQueue();
  grpc::EnableDefaultHealthCheckService(true);
  int silo_port = 0;
  granary::silo::SiloControlService control;
  granary::silo::GatewayServiceOptions peer_options;
  peer_options.max_in_flight = 1 << 16;
  peer_options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  peer_options.max_batch_bytes =
      std::min(1 << 20, absl::GetFlag(FLAGS_max_message_bytes) / 2);
  peer_options.from_silos = true;
  granary::silo::GatewayService peer_gateway(nullptr, peer_options);
  // In a cluster the silo endpoint also serves this silo's part of the
  // grain directory.
  const bool clustered = cluster == "dev";
  granary::silo::DirectoryOwner directory_owner;
  granary::silo::DirectoryService directory_service(&directory_owner);
  grpc::ServerBuilder silo_builder;
  silo_builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // see gateway
  silo_builder.AddListeningPort(absl::GetFlag(FLAGS_silo),
                                grpc::InsecureServerCredentials(), &silo_port);
  silo_builder.RegisterService(&control);
  silo_builder.RegisterService(peer_gateway.grpc_service());
  silo_builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  silo_builder.SetMaxSendMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  if (membership_service != nullptr) {
    silo_builder.RegisterService(membership_service.get());
  }
  if (clustered) silo_builder.RegisterService(&directory_service);
  // A dev cluster's grain state lives with the primary: it serves its store
  // to the others, which use it instead of their own.
  granary::silo::StorageService storage_service(storage.get());
  if (clustered && primary.empty()) {
    silo_builder.RegisterService(&storage_service);
  }
  std::unique_ptr<granary::silo::RemoteGrainStorage> remote_storage;
  if (clustered && !primary.empty()) {
    remote_storage = std::make_unique<granary::silo::RemoteGrainStorage>(primary);
  }
  // So do its reminders: the primary keeps and schedules them all
  // (silo/reminder_remote.h).
  granary::silo::ReminderPeerService reminder_service;
  if (clustered && primary.empty()) {
    silo_builder.RegisterService(&reminder_service);
  }
  std::unique_ptr<granary::silo::RemoteReminders> remote_reminders;
  if (clustered && !primary.empty()) {
    remote_reminders = std::make_unique<granary::silo::RemoteReminders>(primary);
  }
  std::unique_ptr<grpc::Server> silo_server = silo_builder.BuildAndStart();
  if (silo_server == nullptr || silo_port == 0) {
    return Fail(absl::StrCat("cannot listen on --silo=", absl::GetFlag(FLAGS_silo)));
  }
  granary::SplitHostPort(absl::GetFlag(FLAGS_silo), &host, &port);
  const std::string silo_address =
      advertise.empty() ? absl::StrCat(host, ":", silo_port) : advertise;

  granary::silo::SiloOptions options;
  // A restarted silo is a new silo: its identity carries its start time.
  const int64_t generation = absl::ToUnixMillis(absl::Now());
  options.name = absl::StrCat(silo_address, "@", generation);
  control.set_id(options.name);
  options.workers = absl::GetFlag(FLAGS_workers);
  options.turn_budget = absl::GetFlag(FLAGS_turn_budget);
  options.storage = remote_storage != nullptr ? remote_storage.get()
                                              : storage.get();
  options.reminders = reminders;
  options.min_reminder_period = min_reminder_period;
  options.slow_turn_threshold = slow_turn;
  Silo silo(options);
  // The cluster's parts (set up below). Declared before the endpoint's
  // cleanup, so the endpoint stops before they go.
  std::unique_ptr<granary::silo::ClusterDirectory> cluster_directory;
  std::unique_ptr<granary::silo::SiloTransport> transport;
  std::unique_ptr<granary::silo::ClusterRouter> router;
  // Whichever way Main returns from here on, the silo endpoint stops serving
  // (peer calls, probes, the table) before the silo it forwards to is gone.
  absl::Cleanup stop_silo_endpoint = [&] {
    peer_gateway.Stop();
    silo_server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(500));
    silo_server->Wait();
  };
  if (absl::Status s = granary::examples::AddExampleGrains(silo); !s.ok()) {
    return Fail(s.ToString());
  }
  granary::bench::BenchStats bench_stats, state_stats;
  if (absl::Status s =
          granary::bench::AddBenchGrains(silo, &bench_stats, &state_stats);
      !s.ok()) {
    return Fail(s.ToString());
  }
  // In a cluster, calls for grains not active here go where the directory
  // says (silo/cluster_router.h).
  directory_owner.set_self_id(options.name);
  // A silo declared dead may run grain code until its lease ends: its
  // grains are not activated elsewhere before that.
  directory_owner.set_dead_grace(membership_options.lease);
  if (clustered) {
    cluster_directory =
        std::make_unique<granary::silo::ClusterDirectory>(&directory_owner);
    std::vector<const granary::InterfaceInfo*> interfaces;
    for (const granary::GrainClassInfo* t : silo.GrainTypes()) {
      interfaces.push_back(t->interface);
    }
    transport = std::make_unique<granary::silo::SiloTransport>(
        options.name, std::move(interfaces));
    router = std::make_unique<granary::silo::ClusterRouter>(
        &silo, &directory_owner, cluster_directory.get(), transport.get());
    silo.SetRouter(router.get());
  }
  {
    std::vector<std::string> types;
    for (const granary::GrainClassInfo* t : silo.GrainTypes()) {
      types.emplace_back(t->interface->type_name);
    }
    storage_service.AllowTypes(types);
  }
  if (remote_reminders != nullptr) {
    silo.reminders().SetKeeper(remote_reminders.get());
  }
  if (absl::Status s = silo.Start(); !s.ok()) return Fail(s.ToString());
  reminder_service.Attach(&silo);
  peer_gateway.set_address(silo_address);
  peer_gateway.Attach(&silo);
  GatewayServer gateway(&silo, absl::GetFlag(FLAGS_gateway),
                        absl::GetFlag(FLAGS_max_message_bytes),
                        absl::GetFlag(FLAGS_max_in_flight));
  std::atomic<granary::silo::MembershipAgent*> agent_ptr{nullptr};
  gateway.set_cluster_view([&agent_ptr](granary::v1::MembershipView* out) {
    if (granary::silo::MembershipAgent* a = agent_ptr.load()) *out = a->view();
  });
  if (absl::Status s = gateway.Start(); !s.ok()) return Fail(s.ToString());
  HttpServer http(absl::GetFlag(FLAGS_http));
  granary::silo::AdminHttp admin(&silo, gateway.address());
  admin.Register(&http);  // /metrics, /api/overview and the dashboard at /
  if (absl::Status s = http.Start(); !s.ok()) return Fail(s.ToString());
  admin.Start();

  // Join the membership table (a table of one with --cluster=local).
  granary::v1::Member self;
  self.set_address(silo_address);
  self.set_generation(generation);
  self.set_gateway(gateway.address());
  self.set_http(http.address());
  granary::silo::MembershipAgent agent(
      table, self, membership_options,
      [&silo] { return static_cast<int64_t>(silo.ActivationCount()); });
  agent.SetDeclaredDeadHandler([name = options.name] {
    // The cluster has given this silo's grains up: stop serving at once,
    // without deactivating anything (their new homes own them now).
    GRANARY_LOG(kError) << "silo=" << name
                        << " declared dead by the cluster; exiting";
    std::fflush(stderr);
    std::_Exit(3);
  });
  agent.SetLeaseListener(
      [&silo](int64_t until_ns) { silo.RenewLease(until_ns); });
  if (clustered) {
    agent.SetViewListener([&](const granary::v1::MembershipView& v) {
      directory_owner.OnView(v);
      cluster_directory->OnView(v);
      transport->OnView(v);
      router->OnView(v);
    });
  }
  int subscription = 0;
  if (local_table != nullptr) {
    subscription = local_table->Subscribe(
        [&agent](const granary::v1::MembershipView& v) { agent.OnView(v); });
  }
  absl::Cleanup unsubscribe = [&] {
    if (local_table != nullptr) local_table->Unsubscribe(subscription);
    if (remote_table != nullptr) remote_table->StopWatch();
  };
  if (absl::Status s = agent.Join(join_timeout); !s.ok()) {
    return Fail(s.ToString());
  }
  if (remote_table != nullptr) {
    remote_table->Watch(
        [&agent](const granary::v1::MembershipView& v) { agent.OnView(v); });
  }
  agent.Start();
  agent_ptr = &agent;
  admin.SetMembership([&agent] { return agent.view(); });
  silo.SetMembershipView([&agent] { return agent.view(); });

  std::printf("READY gateway=%s silo=%s http=%s\n", gateway.address().c_str(),
              silo_address.c_str(), http.address().c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  GRANARY_LOG(kInfo) << "silo=" << options.name << " signal=" << sig
                     << " shutting down";
  // A second signal ends the process at once.
  std::thread([signals]() mutable {
    int again = 0;
    sigwait(&signals, &again);
    std::_Exit(1);
  }).detach();
  agent.BeginLeave();  // ShuttingDown: the others stop counting on this silo
  if (router != nullptr) {
    // The owners of this silo's grains under the ring without it learn
    // where they live before they go (see ClusterRouter, rebuild reports).
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    while (router->reported_ring() != directory_owner.ring_fingerprint() &&
           absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  // Grains deactivate (state written); in a cluster, calls still queued for
  // them, and calls that arrive from now on, go on to their new homes.
  silo.Stop();
  // Clients send what this gateway did not take elsewhere.
  gateway.Stop(router != nullptr ? absl::Seconds(10) : absl::Milliseconds(500));
  if (router != nullptr) {
    // Nothing names this silo any more; calls already on their way here
    // are passed on while the others learn that.
    absl::SleepFor(absl::Milliseconds(500));
  }
  agent_ptr = nullptr;
  if (remote_table != nullptr) remote_table->StopWatch();
  agent.Leave();  // Dead: a graceful exit
  peer_gateway.Stop();
  if (router != nullptr) {
    // Calls from other silos still being passed on finish first.
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (peer_gateway.open_streams() > 0 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  std::move(stop_silo_endpoint).Invoke();  // nothing arrives from here on
  if (router != nullptr) router->Close();
  if (transport != nullptr) transport->Close();
  silo.SetMembershipView(nullptr);
  http.Stop();
  admin.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A Granary silo with the example grains. Example: granary-silo "
      "--gateway=127.0.0.1:30000");
  std::vector<std::string> storage;
  std::vector<char*> args = WithConfigAsFlagfile(argc, argv, &storage);
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  return Main();
}
