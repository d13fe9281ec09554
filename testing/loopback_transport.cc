#include "testing/loopback_transport.h"

#include <atomic>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/grain_interface.h"
#include "core/member.h"
#include "directory/partition.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/runtime.h"

namespace granary::testing {

// One request on its way. Exactly one of deliver and fail runs.
struct LoopbackNetwork::Packet {
  std::string from;
  std::string to;
  std::function<void(const Endpoint&)> deliver;
  std::function<void(absl::Status)> fail;
  std::atomic<bool> done{false};
  bool Claim() { return !done.exchange(true, std::memory_order_acq_rel); }
};

// A delayed delivery or a held request's timeout.
struct LoopbackNetwork::PacketTimer final : TimerEntry {
  LoopbackNetwork* network = nullptr;
  std::shared_ptr<Packet> packet;
  bool timeout = false;
  void OnTimer() override { network->Fire(this); }
};

LoopbackNetwork::LoopbackNetwork(Clock* clock, absl::Duration request_timeout)
    : clock_(clock), request_timeout_(request_timeout), timers_(clock) {}

LoopbackNetwork::~LoopbackNetwork() { Stop(); }

absl::Status LoopbackNetwork::Start() { return timers_.Start(); }

void LoopbackNetwork::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  timers_.Stop();  // no timer fires from here on
  std::vector<std::shared_ptr<Packet>> left;
  {
    MutexLock lock(&mu_);
    for (PacketTimer* t : timers_pending_) {
      left.push_back(t->packet);
      delete t;
    }
    timers_pending_.clear();
    for (auto& [link, packets] : held_) {
      left.insert(left.end(), packets.begin(), packets.end());
    }
    held_.clear();
  }
  for (const auto& p : left) {
    if (p->Claim()) p->fail(absl::UnavailableError("the network stopped"));
  }
}

void LoopbackNetwork::Attach(const std::string& id, const std::string& address,
                             Runtime* silo,
                             directory::DirectoryPartition* partition) {
  MutexLock lock(&mu_);
  endpoints_[id] = Endpoint{address, silo, partition};
}

void LoopbackNetwork::Detach(const std::string& id) {
  MutexLock lock(&mu_);
  endpoints_.erase(id);
}

void LoopbackNetwork::SetFault(const std::string& from, const std::string& to,
                               Fault fault) {
  std::vector<std::shared_ptr<Packet>> released;
  {
    MutexLock lock(&mu_);
    const Link link{from, to};
    if (fault == Fault::kNone) {
      faults_.erase(link);
      auto held = held_.find(link);
      if (held != held_.end()) {
        released = std::move(held->second);
        held_.erase(held);
      }
    } else {
      faults_[link] = fault;
    }
  }
  for (auto& p : released) Run(std::move(p));
}

void LoopbackNetwork::SetDelay(const std::string& from, const std::string& to,
                               absl::Duration delay) {
  MutexLock lock(&mu_);
  if (delay <= absl::ZeroDuration()) {
    delays_.erase(Link{from, to});
  } else {
    delays_[Link{from, to}] = delay;
  }
}

void LoopbackNetwork::Partition(const std::vector<std::string>& a,
                                const std::vector<std::string>& b,
                                Fault fault) {
  for (const std::string& x : a) {
    for (const std::string& y : b) {
      SetFault(x, y, fault);
      SetFault(y, x, fault);
    }
  }
}

void LoopbackNetwork::HealAll() {
  std::vector<std::shared_ptr<Packet>> released;
  {
    MutexLock lock(&mu_);
    faults_.clear();
    delays_.clear();
    for (auto& [link, packets] : held_) {
      for (auto& p : packets) released.push_back(std::move(p));
    }
    held_.clear();
  }
  for (auto& p : released) Run(std::move(p));
}

size_t LoopbackNetwork::held() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [link, packets] : held_) n += packets.size();
  return n;
}

uint64_t LoopbackNetwork::delivered() const {
  MutexLock lock(&mu_);
  return delivered_;
}

bool LoopbackNetwork::Reachable(const std::string& from,
                                const std::string& to) const {
  MutexLock lock(&mu_);
  if (stopped_ || !endpoints_.contains(to)) return false;
  auto fault = faults_.find(Link{from, to});
  return fault == faults_.end() || fault->second != Fault::kRefuse;
}

Runtime* LoopbackNetwork::Reach(const std::string& from,
                                const std::string& address) const {
  MutexLock lock(&mu_);
  if (stopped_) return nullptr;
  for (const auto& [id, endpoint] : endpoints_) {
    if (endpoint.address != address) continue;
    if (id != from && faults_.contains(Link{from, id})) return nullptr;
    return endpoint.silo;
  }
  return nullptr;
}

std::string LoopbackNetwork::IdAt(const std::string& address) const {
  MutexLock lock(&mu_);
  for (const auto& [id, endpoint] : endpoints_) {
    if (endpoint.address == address) return id;
  }
  return "";
}

void LoopbackNetwork::Schedule(std::shared_ptr<Packet> packet, absl::Time when,
                               bool timeout) {
  auto* t = new PacketTimer;
  t->network = this;
  t->packet = std::move(packet);
  t->timeout = timeout;
  timers_pending_.insert(t);
  timers_.Schedule(t, when);
}

void LoopbackNetwork::Send(const std::string& from, const std::string& to,
                           std::function<void(const Endpoint&)> deliver,
                           std::function<void(absl::Status)> fail,
                           absl::Duration timeout) {
  auto packet = std::make_shared<Packet>();
  packet->from = from;
  packet->to = to;
  packet->deliver = std::move(deliver);
  packet->fail = std::move(fail);
  {
    MutexLock lock(&mu_);
    const Link link{from, to};
    auto fault = faults_.find(link);
    const Fault f = fault == faults_.end() ? Fault::kNone : fault->second;
    if (!stopped_ && endpoints_.contains(to) && f != Fault::kRefuse) {
      if (f == Fault::kBlackHole) {
        held_[link].push_back(packet);
        if (timeout > absl::ZeroDuration()) {
          Schedule(packet, clock_->Now() + timeout, /*timeout=*/true);
        }
        return;
      }
      auto delay = delays_.find(link);
      if (delay != delays_.end()) {
        Schedule(std::move(packet), clock_->Now() + delay->second,
                 /*timeout=*/false);
        return;
      }
    }
  }
  Run(std::move(packet));
}

void LoopbackNetwork::Fire(PacketTimer* timer) {
  std::shared_ptr<Packet> packet = std::move(timer->packet);
  const bool timeout = timer->timeout;
  {
    MutexLock lock(&mu_);
    timers_pending_.erase(timer);
  }
  delete timer;
  if (!timeout) {
    Run(std::move(packet));
  } else if (packet->Claim()) {
    packet->fail(absl::DeadlineExceededError(absl::StrCat(
        "no answer from silo ", packet->to, " (the link drops requests)")));
  }
}

// Delivers `packet` now if its receiver is there and the link takes it.
void LoopbackNetwork::Run(std::shared_ptr<Packet> packet) {
  Endpoint to;
  bool reachable = false;
  {
    MutexLock lock(&mu_);
    auto endpoint = endpoints_.find(packet->to);
    auto fault = faults_.find(Link{packet->from, packet->to});
    reachable = !stopped_ && endpoint != endpoints_.end() &&
                (fault == faults_.end() || fault->second != Fault::kRefuse);
    if (reachable) {
      to = endpoint->second;
      ++delivered_;
    }
  }
  if (!packet->Claim()) return;  // timed out meanwhile
  if (!reachable) {
    packet->fail(absl::UnavailableError(
        absl::StrCat("silo ", packet->to, " refused the connection")));
    return;
  }
  packet->deliver(to);
}

void LoopbackNetwork::FailHeld(const std::string& from, const std::string& to,
                               const absl::Status& why) {
  std::vector<std::shared_ptr<Packet>> failed;
  {
    MutexLock lock(&mu_);
    auto held = held_.find(Link{from, to});
    if (held == held_.end()) return;
    failed = std::move(held->second);
    held_.erase(held);
  }
  for (const auto& p : failed) {
    if (p->Claim()) p->fail(why);
  }
}

// --- LoopbackTransport
// --------------------------------------------------------

namespace {

// The answer of `copy` (a call on the receiving silo) becomes the answer of
// `original` (the sender's call), through its serialized form.
void FinishOriginal(void* ctx, CallBase* copy) {
  auto* original = static_cast<CallBase*>(ctx);
  if (!original->one_way() && original->TryClaim()) {
    absl::Status status = copy->status();
    std::string bytes;
    if (status.ok() && (!copy->reply().SerializeToString(&bytes) ||
                        !original->reply().ParseFromString(bytes))) {
      status = absl::InternalError("reply failed to cross the loopback link");
    }
    original->Deliver(std::move(status));
  }
  original->Release();
}

// `call` as the receiving silo decodes it from the wire.
absl::StatusOr<CallBase*> WireCopy(Runtime* to, CallBase* call,
                                   absl::Time now) {
  const InterfaceInfo* iface = to->FindInterface(call->target().type());
  if (iface == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "silo ", to->name(), " hosts no grain type ", call->target().type()));
  }
  std::string payload;
  if (!call->request().SerializeToString(&payload)) {
    return absl::InvalidArgumentError("request failed to serialize");
  }
  CallBase* copy = nullptr;
  if (call->method() == kReminderMethod) {
    GRANARY_ASSIGN_OR_RETURN(copy, silo::ReminderCallFromWire(
                                       *iface, call->target().key(), payload));
  } else {
    if (call->method() >= iface->method_count) {
      return absl::UnimplementedError("unknown method");
    }
    const absl::Duration timeout =
        call->deadline_armed()
            ? std::max(absl::Microseconds(1), call->deadline() - now)
            : call->timeout();
    google::protobuf::io::ArrayInputStream in(payload.data(),
                                              static_cast<int>(payload.size()));
    GRANARY_ASSIGN_OR_RETURN(
        copy, NewCallFromWire(*iface, iface->methods[call->method()],
                              call->target().key(), &in, timeout));
  }
  copy->set_hops(call->hops());
  if (const GrainId* from = call->caller_grain()) {
    copy->set_caller_grain(*from);
  }
  if (call->request_context().chain_id != 0) {
    copy->set_request_context(call->request_context());
  }
  return copy;
}

}  // namespace

LoopbackTransport::LoopbackTransport(LoopbackNetwork* network,
                                     std::string self_id)
    : network_(network), self_id_(std::move(self_id)) {}

LoopbackTransport::~LoopbackTransport() { Stop(); }

void LoopbackTransport::OnView(const v1::MembershipView& view) {
  absl::flat_hash_set<std::string> live;
  absl::flat_hash_set<std::string> dead;
  for (const v1::Member& m : view.members()) {
    const std::string id = MemberId(m);
    if (id == self_id_) continue;
    if (IsLive(m)) {
      live.insert(id);
    } else {
      dead.insert(id);
    }
  }
  std::vector<std::string> dropped;
  {
    MutexLock lock(&mu_);
    for (const std::string& id : live_) {
      if (!live.contains(id)) dropped.push_back(id);
    }
    live_ = std::move(live);
  }
  // Requests a black hole holds for a silo no longer live fail now, as a
  // dropped connection fails its calls in flight.
  for (const std::string& id : dropped) {
    network_->FailHeld(
        self_id_, id,
        absl::UnavailableError(absl::StrCat("silo ", id, " left the cluster")));
  }
}

bool LoopbackTransport::IsConnected(const std::string& silo_id) const {
  {
    MutexLock lock(&mu_);
    if (closed_ || !live_.contains(silo_id)) return false;
  }
  return network_->Reachable(self_id_, silo_id);
}

std::vector<std::string> LoopbackTransport::connected() const {
  std::vector<std::string> ids;
  {
    MutexLock lock(&mu_);
    ids.assign(live_.begin(), live_.end());
  }
  std::vector<std::string> out;
  for (const std::string& id : ids) {
    if (IsConnected(id)) out.push_back(id);
  }
  return out;
}

void LoopbackTransport::Send(const std::string& silo_id, CallBase* call) {
  if (TrySend(silo_id, call)) return;
  call->Fail(absl::UnavailableError(absl::StrCat(
      "silo ", silo_id, " is not connected (unknown, dead or unreachable)")));
  call->Release();
}

bool LoopbackTransport::TrySend(const std::string& silo_id, CallBase* call) {
  if (!IsConnected(silo_id)) return false;
  Forward(silo_id, call);
  return true;
}

void LoopbackTransport::Forward(const std::string& silo_id, CallBase* call) {
  Clock* clock = network_->clock_;
  network_->Send(
      self_id_, silo_id,
      [call, clock](const LoopbackNetwork::Endpoint& to) {
        absl::StatusOr<CallBase*> copy = WireCopy(to.silo, call, clock->Now());
        if (!copy.ok()) {
          call->Fail(copy.status());
          call->Release();
          return;
        }
        (*copy)->SetDoneCallback(&FinishOriginal, call);
        // A cancel of the call reaches its copy, as one sent over gRPC does.
        if (!call->one_way() && !(*copy)->Adopt(call)) (*copy)->Cancel();
        if (call->method() == kReminderMethod) {
          to.silo->internals().InvokeReminder(*copy);
        } else {
          to.silo->Invoke(*copy);
        }
      },
      [call](absl::Status why) {
        call->Fail(std::move(why));
        call->Release();
      },
      absl::ZeroDuration());
}

void LoopbackTransport::SendDirectory(const std::string& silo_id,
                                      directory::DirectoryOp op,
                                      v1::DirectoryRequest request, Done done) {
  auto shared = std::make_shared<Done>(std::move(done));
  network_->Send(
      self_id_, silo_id,
      [op, request = std::move(request),
       shared](const LoopbackNetwork::Endpoint& to) {
        switch (op) {
          case directory::DirectoryOp::kRegister:
            (*shared)(to.partition->Register(request));
            return;
          case directory::DirectoryOp::kLookup:
            (*shared)(to.partition->Lookup(request));
            return;
          case directory::DirectoryOp::kUnregister:
            (*shared)(to.partition->Unregister(request));
            return;
        }
      },
      [shared](absl::Status why) { (*shared)(std::move(why)); },
      network_->request_timeout_);
}

void LoopbackTransport::SendRebuild(const std::string& silo_id,
                                    v1::RebuildRequest request,
                                    RebuildDone done) {
  auto shared = std::make_shared<RebuildDone>(std::move(done));
  network_->Send(
      self_id_, silo_id,
      [request = std::move(request),
       shared](const LoopbackNetwork::Endpoint& to) {
        (*shared)(to.partition->Rebuild(request));
      },
      [shared](absl::Status why) { (*shared)(std::move(why)); },
      network_->request_timeout_);
}

void LoopbackTransport::Probe(const std::string& address,
                              v1::ProbeRequest request, absl::Duration timeout,
                              ProbeDone done) {
  const std::string to = network_->IdAt(address);
  if (to.empty()) {
    done(absl::UnavailableError(absl::StrCat("nothing listens at ", address)));
    return;
  }
  auto shared = std::make_shared<ProbeDone>(std::move(done));
  network_->Send(
      self_id_, to,
      [to, shared](const LoopbackNetwork::Endpoint&) {
        v1::ProbeReply reply;
        reply.set_id(to);
        (*shared)(std::move(reply));
      },
      [shared](absl::Status why) { (*shared)(std::move(why)); }, timeout);
}

void LoopbackTransport::SendMigration(const std::string& silo_id,
                                      v1::MigrationRequest request,
                                      absl::Duration timeout,
                                      MigrationDone done) {
  auto shared = std::make_shared<MigrationDone>(std::move(done));
  network_->Send(
      self_id_, silo_id,
      [request = std::move(request),
       shared](const LoopbackNetwork::Endpoint& to) {
        if (to.silo == nullptr) {
          (*shared)(absl::UnavailableError("no silo runs there"));
          return;
        }
        to.silo->AcceptMigration(
            request, [shared](absl::StatusOr<v1::MigrationReply> r) {
              (*shared)(std::move(r));
            });
      },
      [shared](absl::Status why) { (*shared)(std::move(why)); }, timeout);
}

void LoopbackTransport::Stop() {
  std::vector<std::string> live;
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    live.assign(live_.begin(), live_.end());
    live_.clear();
  }
  for (const std::string& id : live) {
    network_->FailHeld(self_id_, id,
                       absl::UnavailableError("the transport is closed"));
  }
}

}  // namespace granary::testing
