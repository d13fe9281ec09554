#include "silo/cluster/grpc_transport.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
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
                             std::shared_ptr<TimerThread> timers)
    : self_id_(std::move(self_id)),
      interfaces_(std::move(interfaces)),
      connect_timeout_(connect_timeout),
      security_(std::move(security)),
      timers_(std::move(timers)),
      reconnector_(std::make_shared<rpc::Reconnector>()),
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
  MutexLock lock(&mu_);
  if (closed_) return;
  for (const std::string& id : leaving) left_gracefully_.insert(id);
  for (auto it = links_.begin(); it != links_.end();) {
    if (!wanted.contains(it->first)) {
      const bool graceful = left_gracefully_.contains(it->first);
      GRANARY_LOG(kInfo) << "silo=" << self_id_ << " peer=" << it->first
                         << " dropping the connection ("
                         << (graceful ? "left" : "not live") << ")";
      dropped.emplace_back(std::move(it->second),
                           graceful ? absl::Seconds(10) : absl::ZeroDuration());
      left_gracefully_.erase(it->first);
      links_.erase(it++);
    } else {
      ++it;
    }
  }
  wanted_ = std::move(wanted);
  cv_.SignalAll();
  // Closing waits for the connection's streams to end, which may take a
  // while: it happens on a thread of its own, so no view is held up.
  if (dropped.empty()) return;
  closers_.emplace_back([dropped = std::move(dropped)] {
    RunThreadTop("transport_closer", [&dropped] {
      for (const auto& [client, drain] : dropped) client->Close(drain);
    });
  });
}

bool GrpcTransport::WaitForConnections(absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (true) {
    bool all = true;
    for (const auto& [id, address] : wanted_) all = all && links_.contains(id);
    if (all) return true;
    if (cv_.WaitWithDeadline(&mu_, give_up)) return false;
  }
}

void GrpcTransport::ConnectLoop() {
  MutexLock lock(&mu_);
  while (!closed_) {
    std::vector<std::pair<std::string, std::string>> missing;
    for (const auto& [id, address] : wanted_) {
      if (!links_.contains(id)) missing.emplace_back(id, address);
    }
    if (missing.empty()) {
      cv_.Wait(&mu_);
      continue;
    }
    mu_.Unlock();
    std::vector<std::pair<std::string, std::unique_ptr<rpc::GatewaySet>>> made;
    int failed = 0;
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
        ++failed;
        continue;
      }
      for (const InterfaceInfo* iface : interfaces_)
        (*client)->Register(*iface);
      made.emplace_back(id, *std::move(client));
    }
    mu_.Lock();
    for (auto& [id, client] : made) {
      if (closed_ || !wanted_.contains(id) || links_.contains(id)) {
        mu_.Unlock();
        client->Close(absl::ZeroDuration());
        mu_.Lock();
        continue;
      }
      links_.emplace(id, std::shared_ptr<rpc::GatewaySet>(std::move(client)));
    }
    cv_.SignalAll();
    if (failed > 0 && !closed_) {
      // Some failed: try them again shortly (or at the next view).
      (void)cv_.WaitWithDeadline(&mu_, absl::Now() + absl::Milliseconds(500));
    }
  }
}

void GrpcTransport::Send(const std::string& silo_id, CallBase* call) {
  std::shared_ptr<rpc::GatewaySet> link;
  {
    ReaderMutexLock lock(&mu_);
    auto it = links_.find(silo_id);
    if (it != links_.end()) link = it->second;
  }
  if (link != nullptr) {
    // Outside the lock: a call that fails at once runs its caller's
    // continuation here, which may send again. A link closed meanwhile
    // fails the call UNAVAILABLE (closed_code).
    link->Invoke(call);
    return;
  }
  call->Fail(absl::UnavailableError(absl::StrCat(
      "silo ", silo_id, " is not connected (unknown, dead or unreachable)")));
  call->Release();
}

bool GrpcTransport::TrySend(const std::string& silo_id, CallBase* call) {
  std::shared_ptr<rpc::GatewaySet> link;
  {
    ReaderMutexLock lock(&mu_);
    auto it = links_.find(silo_id);
    if (it == links_.end()) return false;
    link = it->second;
  }
  // Not connected (reconnecting, or the peer is gone but not yet declared
  // dead): the caller tries again later rather than fail the call here.
  if (link->connected() == 0) return false;
  link->Invoke(call);
  return true;
}

bool GrpcTransport::IsConnected(const std::string& silo_id) const {
  ReaderMutexLock lock(&mu_);
  auto it = links_.find(silo_id);
  return it != links_.end() && it->second->connected() > 0;
}

std::vector<std::string> GrpcTransport::connected() const {
  ReaderMutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [id, link] : links_) {
    if (link->connected() > 0) out.push_back(id);
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

void GrpcTransport::Stop() {
  absl::flat_hash_map<std::string, std::shared_ptr<rpc::GatewaySet>> links;
  {
    MutexLock lock(&mu_);
    closed_ = true;
    links.swap(links_);
    cv_.SignalAll();
  }
  if (connector_.joinable()) connector_.join();
  for (auto& [id, link] : links) link->Close(absl::ZeroDuration());
  std::vector<std::thread> closers;
  {
    MutexLock lock(&mu_);
    closers.swap(closers_);
  }
  for (std::thread& t : closers) t.join();
  reconnector_->Stop();  // every set is closed
}

}  // namespace granary::silo
