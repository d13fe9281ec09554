#include "silo/cluster/grpc_transport.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/thread_top.h"
#include "grpcpp/grpcpp.h"
#include "rpc/async_unary.h"
#include "rpc/callback_queue.h"
#include "rpc/credentials.h"
#include "rpc/gateway_set.h"
#include "rpc/limits.h"
#include "rpc/reconnector.h"
#include "storage/membership_table.h"

namespace granary::silo {

GrpcTransport::GrpcTransport(std::string self_id,
                             std::vector<const InterfaceInfo*> interfaces,
                             absl::Duration connect_timeout,
                             rpc::ClientSecurity security,
                             std::shared_ptr<TimerThread> timers,
                             absl::Duration idle_timeout)
    : self_id_(std::move(self_id)),
      interfaces_(std::move(interfaces)),
      connect_timeout_(connect_timeout),
      security_(std::move(security)),
      timers_(std::move(timers)),
      reconnector_(std::make_shared<rpc::Reconnector>()),
      idle_timeout_(idle_timeout),
      directory_(absl::Seconds(5), security_) {}

absl::Status GrpcTransport::Start() {
  MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("the transport is closed");
  if (!connector_.joinable()) {
    GRANARY_RETURN_IF_ERROR(reconnector_->Start());
    connector_ = std::thread([this] {
      RunThreadTop("transport_connector", [this] { ConnectLoop(); });
    });
  }
  return absl::OkStatus();
}

GrpcTransport::~GrpcTransport() { Stop(); }

void GrpcTransport::OnView(const v1::MembershipView& view) {
  directory_.OnView(view);
  absl::flat_hash_map<std::string, std::string> wanted;
  absl::flat_hash_set<std::string> leaving;
  for (const v1::Member& m : view.members()) {
    const std::string id = storage::MemberId(m);
    if (id == self_id_) continue;
    if (m.status() == v1::MEMBER_SHUTTING_DOWN) leaving.insert(id);
    if (m.status() == v1::MEMBER_JOINING || m.status() == v1::MEMBER_ACTIVE ||
        m.status() == v1::MEMBER_SHUTTING_DOWN) {
      wanted.emplace(id, m.address());
    }
  }
  // (client, drain): a silo that left gracefully answers what it took
  // before it goes, so its calls in flight get their answers; one that was
  // declared dead without leaving (crashed, cut off) has its calls fail now,
  // not at their deadline.
  std::vector<std::pair<std::shared_ptr<rpc::GatewaySet>, absl::Duration>>
      dropped;
  std::vector<CallBase*> orphaned;
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    for (const std::string& id : leaving) left_gracefully_.insert(id);
    for (auto it = links_.begin(); it != links_.end();) {
      if (!wanted.contains(it->first)) {
        const bool graceful = left_gracefully_.contains(it->first);
        GRANARY_LOG(kInfo) << "silo=" << self_id_ << " peer=" << it->first
                           << " dropping the connection ("
                           << (graceful ? "left" : "not live") << ")";
        dropped.emplace_back(
            std::move(it->second->set),
            graceful ? absl::Seconds(10) : absl::ZeroDuration());
        left_gracefully_.erase(it->first);
        links_.erase(it++);
      } else {
        ++it;
      }
    }
    absl::erase_if(left_gracefully_,
                   [&](const std::string& id) { return !wanted.contains(id); });
    absl::erase_if(demanded_,
                   [&](const auto& d) { return !wanted.contains(d.first); });
    for (auto it = awaiting_.begin(); it != awaiting_.end();) {
      if (!wanted.contains(it->first)) {
        orphaned.insert(orphaned.end(), it->second.begin(), it->second.end());
        awaiting_.erase(it++);
      } else {
        ++it;
      }
    }
    wanted_ = std::move(wanted);
    cv_.SignalAll();
    // Closing waits for the connection's streams to end, which may take a
    // while: it happens on a thread of its own, so no view is held up.
    if (!dropped.empty()) {
      closers_.emplace_back([dropped = std::move(dropped)] {
        RunThreadTop("transport_closer", [&dropped] {
          for (const auto& [client, drain] : dropped) client->Close(drain);
        });
      });
    }
  }
  FailAll(std::move(orphaned),
          absl::UnavailableError("the silo is no longer live"));
}

void GrpcTransport::FailAll(std::vector<CallBase*> calls,
                            const absl::Status& why) {
  for (CallBase* call : calls) {
    call->Fail(why);
    call->Release();
  }
}

void GrpcTransport::DemandLocked(const std::string& id) const {
  if (closed_ || !wanted_.contains(id) || links_.contains(id)) return;
  auto [it, added] = demanded_.try_emplace(id, absl::Now());
  if (added) {
    cv_.SignalAll();
  } else {
    it->second = absl::Now();
  }
}

bool GrpcTransport::WaitForConnections(absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  MutexLock lock(&mu_);
  for (const auto& [id, address] : wanted_) DemandLocked(id);
  while (true) {
    bool all = true;
    for (const auto& [id, address] : wanted_) all = all && links_.contains(id);
    if (all) return true;
    if (cv_.WaitWithDeadline(&mu_, give_up)) return false;
  }
}

size_t GrpcTransport::links() const {
  ReaderMutexLock lock(&mu_);
  return links_.size();
}

absl::Time GrpcTransport::CloseIdleLocked() {
  const absl::Time now = absl::Now();
  const int64_t now_ns = MonoNanos();
  const int64_t idle_ns = absl::ToInt64Nanoseconds(idle_timeout_);
  std::vector<std::shared_ptr<rpc::GatewaySet>> idle;
  for (auto it = links_.begin(); it != links_.end();) {
    PeerLink& link = *it->second;
    if (now_ns - link.used_ns.load(std::memory_order_relaxed) >= idle_ns &&
        link.set->in_flight() == 0) {
      idle.push_back(std::move(link.set));
      links_.erase(it++);
    } else {
      ++it;
    }
  }
  absl::erase_if(demanded_, [&](const auto& d) {
    return now - d.second >= idle_timeout_ && !awaiting_.contains(d.first);
  });
  if (!idle.empty()) {
    GRANARY_LOG(kInfo) << "silo=" << self_id_ << " closing " << idle.size()
                       << " idle link(s); " << links_.size() << " left";
    closers_.emplace_back([idle = std::move(idle)] {
      RunThreadTop("transport_closer", [&idle] {
        for (const auto& client : idle) client->Close(absl::ZeroDuration());
      });
    });
  }
  return now + std::clamp(idle_timeout_ / 4, absl::Milliseconds(10),
                          absl::Seconds(10));
}

void GrpcTransport::ConnectLoop() {
  MutexLock lock(&mu_);
  absl::Time sweep = absl::Now();
  while (!closed_) {
    if (absl::Now() >= sweep) sweep = CloseIdleLocked();
    std::vector<std::pair<std::string, std::string>> missing;
    for (const auto& [id, at] : demanded_) {
      auto address = wanted_.find(id);
      if (address != wanted_.end() && !links_.contains(id)) {
        missing.emplace_back(id, address->second);
      }
    }
    if (missing.empty()) {
      (void)cv_.WaitWithDeadline(&mu_, sweep);
      continue;
    }
    mu_.Unlock();
    std::vector<std::pair<std::string, std::unique_ptr<rpc::GatewaySet>>> made;
    std::vector<std::pair<std::string, absl::Status>> failed;
    for (const auto& [id, address] : missing) {
      {
        // Each connect may take connect_timeout_: skip the peers that went
        // meanwhile (declared dead, or this transport stopping), so rows
        // that never answer cannot hold up a stop or the next live peer.
        MutexLock again(&mu_);
        if (closed_) break;
        if (!wanted_.contains(id) || links_.contains(id)) continue;
      }
      rpc::GatewaySetOptions options;
      options.gateways = {address};
      options.connect_timeout = connect_timeout_;
      options.security = security_;
      options.overflow =
          rpc::GatewaySetOptions::Overflow::kFail;  // never block a worker
      options.max_in_flight = 1 << 16;
      options.closed_code = absl::StatusCode::kUnavailable;
      options.gateway_refresh_period = absl::ZeroDuration();  // this silo only
      options.timer_thread = timers_;
      options.reconnector = reconnector_;
      absl::StatusOr<std::unique_ptr<rpc::GatewaySet>> client =
          rpc::GatewaySet::Connect(options);
      if (!client.ok()) {
        GRANARY_LOG(kWarning) << "silo=" << self_id_ << " peer=" << id
                              << " cannot connect: " << client.status();
        failed.emplace_back(id, client.status());
        continue;
      }
      for (const InterfaceInfo* iface : interfaces_)
        (*client)->Register(*iface);
      made.emplace_back(id, *std::move(client));
    }
    std::vector<
        std::pair<std::shared_ptr<rpc::GatewaySet>, std::vector<CallBase*>>>
        ready;
    std::vector<std::pair<absl::Status, std::vector<CallBase*>>> refused;
    mu_.Lock();
    for (auto& [id, client] : made) {
      if (closed_ || !wanted_.contains(id) || links_.contains(id)) {
        mu_.Unlock();
        client->Close(absl::ZeroDuration());
        mu_.Lock();
        continue;
      }
      auto link = std::make_shared<PeerLink>();
      link->set = std::move(client);
      link->used_ns.store(MonoNanos(), std::memory_order_relaxed);
      demanded_.erase(id);
      auto held = awaiting_.find(id);
      if (held != awaiting_.end()) {
        ready.emplace_back(link->set, std::move(held->second));
        awaiting_.erase(held);
      }
      links_.emplace(id, std::move(link));
    }
    // Calls held for a silo that cannot be reached fail now, as calls to
    // an unreachable silo do; later calls ask for the link again.
    for (auto& [id, why] : failed) {
      auto held = awaiting_.find(id);
      if (held == awaiting_.end()) continue;
      refused.emplace_back(
          absl::UnavailableError(
              absl::StrCat("silo ", id, " cannot be reached: ", why.message())),
          std::move(held->second));
      awaiting_.erase(held);
    }
    cv_.SignalAll();
    if (!ready.empty() || !refused.empty()) {
      mu_.Unlock();
      for (auto& [set, calls] : ready) {
        for (CallBase* call : calls) set->Invoke(call);
      }
      for (auto& [why, calls] : refused) FailAll(std::move(calls), why);
      mu_.Lock();
    }
    if (!failed.empty() && !closed_) {
      // Some failed: try them again shortly (or at the next view).
      (void)cv_.WaitWithDeadline(&mu_, absl::Now() + absl::Milliseconds(500));
    }
  }
}

void GrpcTransport::Send(const std::string& silo_id, CallBase* call) {
  std::shared_ptr<PeerLink> link;
  absl::Status why = absl::UnavailableError(absl::StrCat(
      "silo ", silo_id, " is not connected (unknown, dead or unreachable)"));
  {
    MutexLock lock(&mu_);
    auto it = links_.find(silo_id);
    if (it != links_.end()) {
      link = it->second;
      link->used_ns.store(MonoNanos(), std::memory_order_relaxed);
    } else if (!closed_ && wanted_.contains(silo_id)) {
      std::vector<CallBase*>& held = awaiting_[silo_id];
      if (held.size() < kMaxCallsAwaitingLink) {
        held.push_back(call);  // sent once the link is up
        DemandLocked(silo_id);
        return;
      }
      why = absl::UnavailableError(
          absl::StrCat("silo ", silo_id, " is being connected to, and ",
                       kMaxCallsAwaitingLink, " calls already wait for it"));
    }
  }
  if (link != nullptr) {
    // Outside the lock: a call that fails at once runs its caller's
    // continuation here, which may send again. A link closed meanwhile
    // fails the call UNAVAILABLE (closed_code).
    link->set->Invoke(call);
    return;
  }
  call->Fail(why);
  call->Release();
}

bool GrpcTransport::TrySend(const std::string& silo_id, CallBase* call) {
  std::shared_ptr<PeerLink> link;
  {
    ReaderMutexLock lock(&mu_);
    auto it = links_.find(silo_id);
    if (it != links_.end()) {
      link = it->second;
      // Marked used under the lock, so the idle sweep (which holds it
      // exclusively) never closes a link a call has just taken.
      link->used_ns.store(MonoNanos(), std::memory_order_relaxed);
    }
  }
  if (link == nullptr) {
    // Not linked yet: the link is made in the background, and the caller
    // tries again shortly.
    MutexLock lock(&mu_);
    DemandLocked(silo_id);
    return false;
  }
  // Not connected (reconnecting, or the peer is gone but not yet declared
  // dead): the caller tries again later rather than fail the call here.
  if (link->set->connected() == 0) return false;
  link->set->Invoke(call);
  return true;
}

bool GrpcTransport::IsConnected(const std::string& silo_id) const {
  {
    ReaderMutexLock lock(&mu_);
    auto it = links_.find(silo_id);
    if (it != links_.end()) return it->second->set->connected() > 0;
  }
  MutexLock lock(&mu_);
  DemandLocked(silo_id);  // asked about: it is about to be called
  return false;
}

std::vector<std::string> GrpcTransport::connected() const {
  ReaderMutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [id, link] : links_) {
    if (link->set->connected() > 0) out.push_back(id);
  }
  return out;
}

void GrpcTransport::SendDirectory(const std::string& silo_id,
                                  directory::DirectoryOp op,
                                  v1::DirectoryRequest request, Done done) {
  directory_.SendDirectory(silo_id, op, std::move(request), std::move(done));
}

void GrpcTransport::SendRebuild(const std::string& silo_id,
                                v1::RebuildRequest request, RebuildDone done) {
  directory_.SendRebuild(silo_id, std::move(request), std::move(done));
}

std::shared_ptr<v1::SiloControl::Stub> GrpcTransport::ControlStub(
    const std::string& address) {
  MutexLock lock(&probe_mu_);
  std::shared_ptr<v1::SiloControl::Stub>& stub = probe_stubs_[address];
  if (stub == nullptr) {
    stub = v1::SiloControl::NewStub(
        rpc::NewChannel(address, rpc::MakeChannelCredentials(security_)));
  }
  return stub;
}

void GrpcTransport::Probe(const std::string& address, v1::ProbeRequest request,
                          absl::Duration timeout, ProbeDone done) {
  std::shared_ptr<v1::SiloControl::Stub> stub = ControlStub(address);
  rpc::StartUnary<v1::ProbeRequest, v1::ProbeReply>(
      std::move(request), timeout, /*wait_for_ready=*/false, stub,
      [&](grpc::ClientContext* c, const v1::ProbeRequest* q, v1::ProbeReply* r,
          std::function<void(grpc::Status)> on_done) {
        stub->async()->Probe(c, q, r, std::move(on_done));
      },
      std::move(done));
}

void GrpcTransport::SendMigration(const std::string& silo_id,
                                  v1::MigrationRequest request,
                                  absl::Duration timeout, MigrationDone done) {
  std::string address;
  {
    ReaderMutexLock lock(&mu_);
    auto it = wanted_.find(silo_id);
    if (it != wanted_.end()) address = it->second;
  }
  if (address.empty()) {
    done(absl::UnavailableError(
        absl::StrCat("silo ", silo_id, " is not a live member")));
    return;
  }
  std::shared_ptr<v1::SiloControl::Stub> stub = ControlStub(address);
  rpc::StartUnary<v1::MigrationRequest, v1::MigrationReply>(
      std::move(request), timeout, /*wait_for_ready=*/false, stub,
      [&](grpc::ClientContext* c, const v1::MigrationRequest* q,
          v1::MigrationReply* r, std::function<void(grpc::Status)> on_done) {
        stub->async()->AcceptMigration(c, q, r, std::move(on_done));
      },
      std::move(done));
}

void GrpcTransport::Stop() {
  absl::flat_hash_map<std::string, std::shared_ptr<PeerLink>> links;
  std::vector<CallBase*> held;
  {
    MutexLock lock(&mu_);
    closed_ = true;
    links.swap(links_);
    for (auto& [id, calls] : awaiting_) {
      held.insert(held.end(), calls.begin(), calls.end());
    }
    awaiting_.clear();
    demanded_.clear();
    cv_.SignalAll();
  }
  FailAll(std::move(held), absl::UnavailableError("the transport is closed"));
  if (connector_.joinable()) connector_.join();
  for (auto& [id, link] : links) link->set->Close(absl::ZeroDuration());
  std::vector<std::thread> closers;
  {
    MutexLock lock(&mu_);
    closers.swap(closers_);
  }
  for (std::thread& t : closers) t.join();
  reconnector_->Stop();  // every set is closed
}

}  // namespace granary::silo
