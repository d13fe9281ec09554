// SiloHost's last steps of start (joining the membership table, wiring its
// views to the cluster's parts) and its graceful stop (silo/silo_host.h
// gives the order).
#include <algorithm>

#include "absl/time/clock.h"
#include "core/log.h"
#include "silo/silo_host.h"
#include "silo/silo_host_parts.h"
#include "silo/systemd_notify.h"

namespace granary::silo {

absl::Status SiloHost::JoinCluster() {
  Parts& p = *parts_;
  v1::Member self;
  self.set_address(p.silo_address);
  self.set_generation(p.generation);
  self.set_gateway(AdvertisedGateway(options_, p.gateway->address()));
  self.set_http(p.http->address());
  Silo* silo = p.silo.get();
  for (const GrainClassInfo* t : silo->GrainTypes()) {
    self.add_grain_types(std::string(t->interface->type_name));
  }
  p.agent = std::make_unique<MembershipAgent>(
      p.cluster->table(), p.transport.get(), self, p.membership,
      [silo] { return static_cast<int64_t>(silo->ActivationCount()); });
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
  p.agent->SetDeclaredDeadHandler(std::move(on_dead));
  p.agent->SetLeaseListener(
      [silo](int64_t until_ns) { silo->RenewLease(until_ns); });
  if (p.cluster->clustered()) WireCluster();
  MembershipAgent* agent = p.agent.get();
  p.cluster->Watch(&silo->timers(),
                   [agent](const v1::MembershipView& v) { agent->OnView(v); });
  p.watching = true;
  GRANARY_RETURN_IF_ERROR(p.agent->Join(options_.join_timeout));
  GRANARY_RETURN_IF_ERROR(p.agent->Start());
  p.agent_ptr = agent;
  p.admin->SetMembership([agent] { return agent->view(); });
  silo->SetMembershipView([agent] { return agent->view(); });
  return absl::OkStatus();
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
    if (by_range) p.silo->reminders().Rebalance();
  });
}

void SiloHost::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (started_) (void)NotifySystemd("STOPPING=1\nSTATUS=leaving the cluster");
  Parts& p = *parts_;
  p.leaving = true;
  if (p.listener_watch != nullptr) p.listener_watch->Stop();
  // Every step below waits at most its own limit and what is left of
  // --shutdown_timeout, but the last ones (clients and silos moving their
  // calls elsewhere) get at least their floor even when the grains took
  // the whole budget to deactivate.
  const absl::Time deadline = absl::Now() + options_.shutdown_timeout;
  const auto left = [deadline](absl::Duration limit,
                               absl::Duration floor = absl::ZeroDuration()) {
    return std::clamp(deadline - absl::Now(), std::min(floor, limit), limit);
  };
  const bool joined = p.agent_ptr.load() != nullptr;
  if (joined) {
    p.agent->BeginLeave();  // ShuttingDown: the others stop counting on it
    if (p.router != nullptr) {
      // The owners of this silo's grains under the ring without it learn
      // where they live before they go (rebuild reports).
      p.router->WaitUntilReported(
          [&p] { return p.partition.ring_fingerprint(); },
          left(std::min(absl::Seconds(5), options_.shutdown_timeout / 6)));
    }
  }
  // Grains deactivate (state written); in a cluster, calls still queued for
  // them, and calls that arrive from now on, go on to their new homes.
  if (p.silo != nullptr) p.silo->Stop();
  // Clients send what this gateway did not take elsewhere.
  if (p.gateway != nullptr) {
    p.gateway->Stop(
        p.router != nullptr
            ? left(absl::Seconds(10), absl::Seconds(1))
            : left(absl::Milliseconds(500), absl::Milliseconds(200)));
  }
  p.agent_ptr = nullptr;
  if (p.watching) p.cluster->StopWatch();
  if (joined) p.agent->Leave();  // Dead: a graceful exit
  if (p.peer_gateway != nullptr) {
    if (p.router != nullptr) {
      // The other silos send what they queued here and half-close.
      p.peer_gateway->Drain();
      (void)p.peer_gateway->WaitForStreamsClosed(
          left(absl::Seconds(5), absl::Milliseconds(500)));
    }
    p.peer_gateway->Stop();
    // Calls from other silos still being passed on finish first.
    if (p.router != nullptr)
      p.peer_gateway->WaitForStreamsClosed(
          left(absl::Seconds(10), absl::Seconds(1)));
  }
  // Nothing arrives from here on.
  p.StopSiloEndpoint(left(absl::Milliseconds(500), absl::Milliseconds(500)));
  if (p.router != nullptr) p.router->Stop();
  if (p.transport != nullptr) p.transport->Stop();
  if (p.silo != nullptr) p.silo->SetMembershipView(nullptr);
  if (p.http != nullptr) p.http->Stop();
  if (p.admin != nullptr) p.admin->Stop();
  for (int port : p.guarded_ports) rpc::UnguardListener(port);
  p.agent.reset();
}

}  // namespace granary::silo
