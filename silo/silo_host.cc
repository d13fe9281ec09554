// SiloHost's start and stop (silo/silo_host.h): the parts subscribe to the
// lifecycle's stages (silo/lifecycle.h); this file holds the stores and the
// runtime, silo_host_listeners.cc the silo endpoint, the client gateway and
// HTTP, silo_host_cluster.cc the cluster's parts and membership.
#include "silo/silo_host.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/process_load.h"
#include "silo/grain_library_loader.h"
#include "silo/silo_host_parts.h"
#include "silo/systemd_notify.h"

namespace granary::silo {

SiloHost::SiloHost(SiloHostOptions options, SiloEnvironment environment)
    : options_(std::move(options)),
      parts_(std::make_unique<Parts>(std::move(environment))) {}

SiloHost::~SiloHost() { Stop(); }

absl::Status SiloHost::AddGrainType(
    const GrainClassInfo& info,
    std::function<std::unique_ptr<Grain>()> factory) {
  if (started_) {
    return absl::FailedPreconditionError("grain types are added before Start");
  }
  grain_adders_.push_back([&info, factory = std::move(factory)](Runtime& silo) {
    return silo.AddGrainType(info, factory);
  });
  return absl::OkStatus();
}

void SiloHost::AddGrains(std::function<absl::Status(Runtime&)> add) {
  grain_adders_.push_back(std::move(add));
}

void SiloHost::AddIncomingFilter(CallFilter f) {
  AddGrains([f](Runtime& s) {
    s.AddIncomingFilter(f);
    return absl::OkStatus();
  });
}
void SiloHost::AddOutgoingFilter(CallFilter f) {
  AddGrains([f](Runtime& s) {
    s.AddOutgoingFilter(f);
    return absl::OkStatus();
  });
}

namespace {

const std::string kNone;

}  // namespace

const std::string& SiloHost::gateway_address() const {
  return parts_->gateway != nullptr ? parts_->gateway->address() : kNone;
}
const std::string& SiloHost::silo_address() const {
  return parts_->silo_address;
}
const std::string& SiloHost::http_address() const {
  return parts_->http != nullptr ? parts_->http->address() : kNone;
}
const std::string& SiloHost::id() const { return parts_->id; }
Runtime* SiloHost::silo() { return parts_->silo.get(); }
GatewayServer* SiloHost::gateway() { return parts_->gateway.get(); }
ClusterRouter* SiloHost::router() { return parts_->router.get(); }
directory::DirectoryPartition* SiloHost::partition() {
  return &parts_->partition;
}
v1::MembershipView SiloHost::membership_view() const {
  MembershipAgent* agent = parts_->agent_ptr.load();
  return agent != nullptr ? agent->view() : v1::MembershipView();
}
Clock* SiloHost::clock() const { return parts_->clock; }

absl::Status SiloHost::Start() {
  if (started_) return absl::FailedPreconditionError("the host was started");
  started_ = true;
  rpc::RouteGrpcLogs();
  Parts& p = *parts_;
  Lifecycle& l = p.lifecycle;
  // In the order of silo/lifecycle.h's stages; the stores' start adds the
  // cluster's parts when the cluster provider is clustered.
  // First to start, last to stop.
  l.Subscribe(
      Stage::kStores, "timers", [&p] { return p.timers->Start(); },
      [&p] { p.timers->Stop(); });
  l.Subscribe(Stage::kStores, "stores", [this] { return StartStores(); });
  SubscribeListeners();
  l.Subscribe(Stage::kRuntime, "runtime", [this] { return MakeRuntime(); });
  l.Subscribe(Stage::kPeerCalls, "runtime", [this] { return StartRuntime(); });
  SubscribeMembership();
  l.Subscribe(Stage::kGrains, "grains", nullptr, [this, &p] {
    if (p.halting) {
      // A crash: nothing the grains do on the way out (directory entries
      // removed, queued calls passed on) reaches the other silos.
      if (p.router != nullptr) p.router->Stop();
      if (p.transport != nullptr) p.transport->Stop();
    }
    // A graceful leave of a cluster hands the grains to the other silos
    // with their state (live migration) rather than deactivating them.
    if (p.silo != nullptr && !p.halting && p.router != nullptr &&
        options_.hand_off_on_leave) {
      p.silo->internals().SetHandOff(true);
    }
    if (p.silo != nullptr) p.silo->Stop();
  });
  l.Subscribe(
      Stage::kActive, "systemd",
      [this] {
        // Under systemd (Type=notify) the unit counts as started from here.
        if (absl::Status s = NotifySystemd(
                absl::StrCat("READY=1\nSTATUS=serving: gateway ",
                             gateway_address(), ", silo ", silo_address()));
            !s.ok()) {
          GRANARY_LOG(kWarning) << "silo=" << id() << " " << s.message();
        }
        return absl::OkStatus();
      },
      [&p] {
        if (p.lifecycle.reached() >= static_cast<int>(Stage::kActive)) {
          (void)NotifySystemd("STOPPING=1\nSTATUS=leaving the cluster");
        }
        p.leaving = true;  // /readyz says 503
        if (p.listener_watch != nullptr) p.listener_watch->Stop();
      });
  return l.Start();
}

void SiloHost::Halt() {
  parts_->halting = true;
  Stop();
}

void SiloHost::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // Every step waits at most its own limit and what is left of
  // --shutdown_timeout, but the last ones (clients and silos moving their
  // calls elsewhere) get at least their floor even when the grains took
  // the whole budget to deactivate (Parts::Left).
  // On the silo's clock, as every other limit of the silo.
  const absl::Time now = parts_->clock->Now();
  parts_->stop_deadline =
      parts_->halting ? now : now + options_.shutdown_timeout;
  parts_->lifecycle.Stop();
  // The agent lives as long as the host: a thread that read the view just
  // as the host left still finds it.
}

// kStores: the options of failure detection, the stores and the cluster
// provider, which adds the cluster's parts when other silos may join.
absl::Status SiloHost::StartStores() {
  Parts& p = *parts_;
  GRANARY_RETURN_IF_ERROR(ValidateSiloHostOptions(options_));
  GuardListeners();
  p.membership.probe_interval = options_.probe_interval;
  p.membership.probe_timeout = options_.probe_timeout;
  p.membership.missed_probes = options_.missed_probes;
  p.membership.votes_to_kill = options_.votes_to_kill;
  p.membership.load_period = options_.load_report_period;
  p.membership.table_host = options_.primary;
  p.membership.clock = p.env.clock;
  p.membership.timer_thread = p.timers;
  // A silo on a host starved of CPU excuses its probes' timeouts for a
  // while (silo/cluster/membership_agent.h). Not in one process on a fake
  // clock, whose rounds must not depend on the machine's load.
  if (!p.env.in_process.has_value()) {
    p.membership.cpu_pressure = [] { return CpuPressure(); };
  }
  GRANARY_RETURN_IF_ERROR(CheckProviderNames(options_, p.env.providers));
  absl::StatusOr<std::unique_ptr<ClusterProvider>> cluster =
      p.env.providers.cluster.at(options_.cluster)(options_);
  if (!cluster.ok()) return cluster.status();
  p.cluster = *std::move(cluster);
  if (p.cluster->clustered() && !options_.unsafe_disable_lease_for_testing) {
    // Grain code runs only while the table confirms this silo (see
    // MembershipOptions::lease).
    p.membership.lease = SafeLease(p.membership);
  }
  if (options_.unsafe_disable_lease_for_testing) {
    GRANARY_LOG(kWarning) << "--unsafe_disable_lease_for_testing: grain code "
                             "runs without a membership lease (tests only)";
  }
  if (absl::Status s = ValidateMembershipOptions(p.membership); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("membership options: ", s.message()));
  }
  absl::StatusOr<StorageStores> stores =
      p.env.providers.storage.at(EffectiveStorage(options_))(options_);
  if (!stores.ok()) return stores.status();
  p.stores = *std::move(stores);
  if (p.cluster->clustered()) SubscribeCluster();
  return absl::OkStatus();
}

// kRuntime: the runtime, with its grain types and call filters.
absl::Status SiloHost::MakeRuntime() {
  Parts& p = *parts_;
  RuntimeOptions options;
  // The runtime's rows of the option table, field by field.
#define GRANARY_RUNTIME_COPY(type, name, default_value, help) \
  options.name = options_.name;
  GRANARY_RUNTIME_OPTIONS(GRANARY_RUNTIME_COPY)
#undef GRANARY_RUNTIME_COPY
  options.name = p.env.in_process.has_value() && !p.env.in_process->name.empty()
                     ? p.env.in_process->name
                     : p.id;
  options.clock = p.env.clock;
  options.timer_thread = p.timers;
  options.storage = p.cluster->grain_storage(p.stores.grain_state.get());
  options.reminders = p.stores.reminders.get();
  options.remote_memory_limit = options_.silo_memory_budget;
  options.shutdown_timeout = options_.shutdown_timeout / 3;
  p.silo = std::make_unique<Runtime>(options);
  // A silo whose lease lapsed runs no grain code: probes see it unhealthy,
  // so a silo cut off from the membership table alone is declared dead.
  p.control.set_health([silo = p.silo.get()]() -> absl::Status {
    if (MonoNanos() <= silo->internals().lease_until_ns())
      return absl::OkStatus();
    return absl::UnavailableError(
        "this silo's membership lease has lapsed (it cannot confirm its "
        "membership in the table)");
  });
  for (const auto& add : grain_adders_) GRANARY_RETURN_IF_ERROR(add(*p.silo));
  for (const std::string& path : options_.grain_library) {
    absl::StatusOr<GrainLibrary> library = GrainLibrary::Load(path);
    if (!library.ok()) return library.status();
    GRANARY_RETURN_IF_ERROR(library->AddTo(*p.silo));
    GRANARY_LOG(kInfo) << "silo=" << p.id
                       << " grain_library=" << LogQuote(library->name())
                       << " path=" << LogQuote(path) << " grain library loaded";
  }
  GRANARY_RETURN_IF_ERROR(p.silo->HostOnly(options_.grain_types));
  absl::StatusOr<Labels> labels = ParseLabels(options_.labels);
  if (!labels.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--labels: ", labels.status().message()));
  }
  p.labels = *std::move(labels);
  p.silo_ptr.store(p.silo.get());
  p.partition.set_self_id(p.id);
  if (ReminderKeeper* keeper = p.cluster->reminder_keeper()) {
    p.silo->internals().reminders().SetKeeper(keeper);
  }
  return absl::OkStatus();
}

// kPeerCalls: the runtime runs; the cluster provider's services and calls
// from other silos reach it.
absl::Status SiloHost::StartRuntime() {
  Parts& p = *parts_;
  GRANARY_RETURN_IF_ERROR(p.silo->Start());
  if (p.directory != nullptr) {
    p.cluster->SetGrainHostCheck([directory = p.directory.get(),
                                  silo = p.silo.get()](rpc::PeerAuthority peer,
                                                       GrainId grain) {
      return CheckGrainHost(directory, silo, std::move(peer), std::move(grain));
    });
  }
  p.cluster->OnSiloStarted(p.silo.get());
  AttachPeers();
  return absl::OkStatus();
}

}  // namespace granary::silo
