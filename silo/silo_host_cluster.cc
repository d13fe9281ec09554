// SiloHost's cluster (silo/silo_host.h): the transport, the directory
// client and the router a clustered provider adds, joining and leaving the
// membership table, and the wiring of its views to the cluster's parts, as
// parts of the host's lifecycle (silo/lifecycle.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/process_load.h"
#include "silo/cluster/grpc_transport.h"
#include "silo/silo_host.h"
#include "silo/silo_host_parts.h"

namespace granary::silo {

// Added by the stores' start when the cluster provider is clustered.
void SiloHost::SubscribeCluster() {
  Parts& p = *parts_;
  p.lifecycle.Subscribe(
      Stage::kCluster, "cluster", [this] { return StartCluster(); },
      [&p] {
        if (p.router != nullptr) p.router->Stop();
        if (p.transport != nullptr) p.transport->Stop();
      });
  // Before the silo endpoint closes: the other silos send what they queued
  // here and half-close, and the calls they passed on finish.
  p.lifecycle.Subscribe(Stage::kPeerCalls, "cluster", nullptr, [&p] {
    if (p.peer_gateway == nullptr || p.halting) return;
    p.peer_gateway->Drain();
    (void)p.peer_gateway->WaitForStreamsClosed(
        p.Left(absl::Seconds(5), absl::Milliseconds(500)));
    p.peer_gateway->Stop();
    (void)p.peer_gateway->WaitForStreamsClosed(
        p.Left(absl::Seconds(10), absl::Seconds(1)));
  });
  // Once this silo is ShuttingDown, the owners of its grains under the ring
  // without it learn where they live before they go (rebuild reports).
  p.lifecycle.Subscribe(Stage::kHandoff, "cluster", nullptr, [this, &p] {
    // (A silo declared dead has no grains to hand over.)
    if (p.router == nullptr || p.agent_ptr.load() == nullptr || p.halting ||
        p.silo->internals().fenced()) {
      return;
    }
    p.router->WaitUntilReported(
        [&p] { return p.partition.ring_fingerprint(); },
        p.Left(std::min(absl::Seconds(5), options_.shutdown_timeout / 6)));
  });
}

// kCluster: calls for grains not active here go where the directory says
// (silo/cluster/routing/cluster_router.h); reminders follow the ring when the
// provider schedules them by range.
absl::Status SiloHost::StartCluster() {
  Parts& p = *parts_;
  // A silo declared dead may run grain code until its lease ends: its
  // grains are not activated elsewhere before that. (The other silos'
  // leases are as long as this one's would be, whether or not this silo
  // runs without one.)
  p.partition.set_dead_grace(SafeLease(p.membership));
  if (p.env.in_process.has_value()) {
    p.transport = p.env.in_process->transport(p.id);
  } else {
    std::vector<const InterfaceInfo*> interfaces;
    for (const GrainClassInfo* t : p.silo->KnownTypes()) {
      interfaces.push_back(t->interface);
    }
    p.transport = std::make_unique<GrpcTransport>(
        p.id, std::move(interfaces), absl::Seconds(2),
        ClusterClientSecurity(options_), p.timers);
  }
  GRANARY_RETURN_IF_ERROR(p.transport->Start());
  p.directory = std::make_unique<directory::DirectoryClient>(&p.partition,
                                                             p.transport.get());
  RouterOptions router;
  router.clock = p.env.clock;
  router.timer_thread = p.timers;
  router.retry_delay = options_.route_retry_delay;
  router.give_up_after = options_.route_timeout;
  p.router = std::make_unique<ClusterRouter>(
      p.silo.get(), &p.partition, p.directory.get(), p.transport.get(), router);
  GRANARY_RETURN_IF_ERROR(p.router->Start());
  p.silo->internals().SetRouter(p.router.get());
  // Activations other silos hand over (live migration).
  p.control.set_migrations(
      [silo = p.silo.get()](
          const v1::MigrationRequest& request,
          std::function<void(absl::StatusOr<v1::MigrationReply>)> done) {
        silo->AcceptMigration(request, std::move(done));
      });
  if (p.cluster->reminders_by_range()) {
    // Each silo schedules the reminders of its range of the ring.
    auto owner = [&p](const GrainId& grain) {
      const std::string owner = p.partition.OwnerOf(grain);
      return owner.substr(0, owner.rfind('@'));  // its silo endpoint
    };
    if (p.env.in_process.has_value() && p.env.in_process->reminders) {
      p.range_reminders = p.env.in_process->reminders(std::move(owner));
    } else {
      p.range_reminders = std::make_unique<RangeReminders>(
          std::move(owner), ClusterClientSecurity(options_));
    }
    p.silo->internals().reminders().SetKeeper(p.range_reminders.get());
    p.silo->internals().reminders().SetRanges([&p](const GrainId& grain) {
      return p.partition.OwnerOf(grain) == p.id;
    });
  }
  return absl::OkStatus();
}

void SiloHost::SubscribeMembership() {
  Parts& p = *parts_;
  p.lifecycle.Subscribe(
      Stage::kMembership, "membership", [this] { return JoinCluster(); },
      [&p] {
        const bool joined = p.agent_ptr.load() != nullptr;
        p.agent_ptr = nullptr;
        if (p.watching) p.cluster->StopWatch();
        p.watching = false;
        if (joined && p.halting) p.agent->Stop();    // the row stays
        if (joined && !p.halting) p.agent->Leave();  // Dead: a graceful exit
        if (p.silo != nullptr) p.silo->internals().SetMembershipView(nullptr);
        p.control.set_migrations(nullptr);
      });
  // ShuttingDown: the others stop counting on this silo.
  p.lifecycle.Subscribe(Stage::kActive, "membership", nullptr, [&p] {
    if (p.agent_ptr.load() != nullptr && !p.halting) p.agent->BeginLeave();
  });
}

// kMembership: joins the membership table (a table of one with the local
// provider): Joining, then Active.
absl::Status SiloHost::JoinCluster() {
  Parts& p = *parts_;
  v1::Member self;
  self.set_address(p.silo_address);
  self.set_generation(p.generation);
  if (p.gateway != nullptr) {
    self.set_gateway(AdvertisedGateway(options_, p.gateway->address()));
  }
  if (p.http != nullptr) self.set_http(p.http->address());
  Runtime* silo = p.silo.get();
  for (const GrainClassInfo* t : silo->GrainTypes()) {
    const InterfaceInfo& iface = *t->interface;
    self.add_grain_types(std::string(iface.type_name));
    v1::HostedType* hosted = self.add_hosted_types();
    hosted->set_type(std::string(iface.type_name));
    hosted->set_version(std::max<uint32_t>(1, iface.version));
    hosted->set_fingerprint(iface.fingerprint);
  }
  for (const auto& [key, value] : p.labels) {
    v1::Label* label = self.add_labels();
    label->set_key(key);
    label->set_value(value);
  }
  p.agent = std::make_unique<MembershipAgent>(
      p.cluster->table(), p.transport.get(), self, p.membership,
      [silo] { return static_cast<int64_t>(silo->ActivationCount()); });
  p.agent->SetLoadSource([meter = std::make_shared<LoadMeter>()] {
    const ProcessLoad load = meter->Sample();
    v1::SiloLoad out;
    out.set_cpu_permille(load.cpu_permille);
    out.set_memory_bytes(load.memory_bytes);
    out.set_memory_limit_bytes(load.memory_limit_bytes);
    return out;
  });
  std::function<void()> on_dead = options_.on_declared_dead;
  if (!on_dead) {
    on_dead = [id = p.id] {
      // The cluster has given this silo's grains up: stop serving at once,
      // without deactivating anything (their new homes own them now).
      GRANARY_LOG(kError) << "silo=" << id
                          << " declared dead by the cluster; exiting";
      std::fflush(stderr);
      std::_Exit(3);
    };
  }
  // No grain code runs here again, whatever the handler does (a process
  // exits; a silo in a test's process stays until the test stops it).
  p.agent->SetDeclaredDeadHandler([silo, on_dead = std::move(on_dead)] {
    silo->internals().Fence();
    on_dead();
  });
  p.agent->SetLeaseListener(
      [silo](int64_t until_ns) { silo->internals().RenewLease(until_ns); });
  if (p.router != nullptr) WireCluster();
  MembershipAgent* agent = p.agent.get();
  p.cluster->Watch(&silo->internals().timers(),
                   [agent](const v1::MembershipView& v) { agent->OnView(v); });
  p.watching = true;
  GRANARY_RETURN_IF_ERROR(p.agent->Join(options_.join_timeout));
  GRANARY_RETURN_IF_ERROR(p.agent->Start());
  p.agent_ptr = agent;
  AddClusterMetrics();
  if (p.admin != nullptr)
    p.admin->SetMembership([agent] { return agent->view(); });
  silo->internals().SetMembershipView([agent] { return agent->view(); });
  return absl::OkStatus();
}

// Failure detection and links, for dashboards and alerts (while joined).
void SiloHost::AddClusterMetrics() {
  Parts& p = *parts_;
  using metrics::Samples;
  using metrics::Type;
  metrics::Registry& registry = p.silo->metrics_registry();
  registry.AddCallback(
      "granary_peer_links",
      "Other silos this silo is connected to. Links open on the first call "
      "to a silo and close when idle.",
      Type::kGauge, {}, [&p] {
        return Samples{
            {{},
             p.agent_ptr.load() == nullptr || p.transport == nullptr
                 ? 0.0
                 : static_cast<double>(p.transport->connected().size())}};
      });
  registry.AddCallback(
      "granary_membership_health_score",
      "This silo's local health score: 0 when its probe rounds run on time, "
      "up to 8 while it runs late; probes that time out meanwhile are "
      "excused, not counted as misses.",
      Type::kGauge, {}, [&p] {
        MembershipAgent* agent = p.agent_ptr.load();
        return Samples{
            {{}, agent == nullptr ? 0.0 : 1.0 * agent->health_score()}};
      });
  registry.AddCallback(
      "granary_membership_probes_failed_total",
      "Probes of other silos that failed: missed (counted towards a vote) "
      "or excused (timed out while this silo ran late).",
      Type::kCounter, {"outcome"}, [&p] {
        MembershipAgent* agent = p.agent_ptr.load();
        if (agent == nullptr) return Samples{};
        return Samples{
            {{"missed"}, static_cast<double>(agent->probes_missed())},
            {{"excused"}, static_cast<double>(agent->probes_excused())}};
      });
  registry.AddCallback(
      "granary_membership_votes_total",
      "Votes this silo wrote against silos it could not reach.", Type::kCounter,
      {}, [&p] {
        MembershipAgent* agent = p.agent_ptr.load();
        return Samples{{{},
                        agent == nullptr
                            ? 0.0
                            : static_cast<double>(agent->votes_cast())}};
      });
}

// Every membership view reaches the directory, the transport and the router.
void SiloHost::WireCluster() {
  Parts& p = *parts_;
  const bool by_range = p.cluster->reminders_by_range();
  p.agent->SetViewListener([&p, by_range](const v1::MembershipView& v) {
    p.hosted_types.OnView(v);
    p.partition.OnView(v);
    p.transport->OnView(v);
    p.router->OnView(v);
    // Reminders follow the ranges.
    if (by_range) p.silo->internals().reminders().Rebalance();
  });
  p.agent->SetLoadListener(
      [&p](const v1::MembershipView& v) { p.router->OnLoad(v); });
}

}  // namespace granary::silo
