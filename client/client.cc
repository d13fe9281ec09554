#include "client/client.h"

#include <array>

#include "client/grpc_callback_queue.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/grpc_callback_queue.h"
#include "core/address.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/process.h"
#include "core/sync.h"
#include "core/timer_queue.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace granary {
namespace {

// True while this thread runs a client reaction (a network thread). Calls
// made there must not block on flow control.
thread_local bool on_network_thread = false;

class NetworkThreadScope {
 public:
  NetworkThreadScope() : saved_(std::exchange(on_network_thread, true)) {}
  ~NetworkThreadScope() { on_network_thread = saved_; }

 private:
  bool saved_;
};

size_t RequestBytes(const v1::Request& r) {
  return r.payload().size() + r.key().size() + r.method().size() + 24;
}

constexpr size_t kMaxBatchBytes = 1 << 20;

}  // namespace

class GatewayLink;

// One `Gateway/Connect` stream. References: one held by its link until the
// stream is done, one by gRPC until OnDone, and short-lived ones by callers
// sending on it; the last deletes it.
//
// Writes come from any thread: a hold taken before StartCall keeps the stream
// alive while writes may still start; it is removed once the stream is dead
// and no write is out. Reads run back to back inside the reactions.
class ClientStream final
    : public grpc::ClientBidiReactor<v1::RequestBatch, v1::ReplyBatch> {
 public:
  ClientStream(GatewayLink* link, const ClientOptions& options)
      : link_(link),
        max_in_flight_(options.max_in_flight),
        overflow_(options.overflow),
        max_batch_bytes_(std::min<size_t>(
            kMaxBatchBytes, static_cast<size_t>(options.max_message_bytes) / 2)) {}

  void Start(v1::Gateway::Stub* stub) {
    stub->async()->Connect(&context_, this);
    AddHold();  // the write flow, which runs outside the reactions
    StartRead(&incoming_);
    StartCall();
  }

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Queues `request` for sending. For an awaited call, `call` is kept (with
  // the reference the caller passes on success) until its reply or the
  // stream's end. Fails with UNAVAILABLE when the stream is gone and
  // RESOURCE_EXHAUSTED on overflow.
  absl::Status Send(v1::Request& request, CallBase* call);

  // Ends the stream; calls still in flight fail with UNAVAILABLE `why`.
  void Cancel(std::string why) {
    {
      MutexLock lock(&mu_);
      if (cancel_reason_.empty()) cancel_reason_ = std::move(why);
    }
    context_.TryCancel();
  }

  int in_flight() const {
    MutexLock lock(&mu_);
    return in_flight_;
  }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  ~ClientStream() override = default;

  // What Advance decided, to be done outside mu_.
  struct Actions {
    bool write = false;
    bool remove_hold = false;
  };
  Actions AdvanceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Act(Actions actions);
  void Advance();
  void Finish(CallBase* call, const v1::Reply& reply);

  GatewayLink* const link_;
  const int max_in_flight_;
  const ClientOptions::Overflow overflow_;
  // Batches are cut here: under the silo's message limit.
  const size_t max_batch_bytes_;
  std::atomic<int> refs_{2};  // the link's and gRPC's
  grpc::ClientContext context_;

  // Read side (one read at a time).
  v1::ReplyBatch incoming_;

  mutable Mutex mu_;
  CondVar space_;  // in_flight_ fell below the limit, or the stream died
  std::deque<v1::Request> pending_ ABSL_GUARDED_BY(mu_);
  int pending_one_way_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, CallBase*> waiting_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  v1::RequestBatch writing_;  // owned by the write out
  int writing_one_way_ ABSL_GUARDED_BY(mu_) = 0;
  bool write_out_ ABSL_GUARDED_BY(mu_) = false;
  bool write_hold_ ABSL_GUARDED_BY(mu_) = true;
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  std::string cancel_reason_ ABSL_GUARDED_BY(mu_);
};

// One gateway: its channel and the current stream to it.
class GatewayLink {
 public:
  GatewayLink(Client::Impl* client, std::string address,
              const ClientOptions& options);
  ~GatewayLink();

  const std::string& address() const { return address_; }
  Client::Impl* client() const { return client_; }

  // The live stream with a reference for the caller, opening one when the
  // gateway is up and none is open; nullptr when the gateway is down.
  ClientStream* Acquire();
  bool up() const { return up_.load(std::memory_order_acquire); }
  // The cluster says this gateway's silo is dead: calls avoid it.
  bool retired() const { return retired_.load(std::memory_order_relaxed); }
  void set_retired(bool r) { retired_.store(r, std::memory_order_relaxed); }
  int in_flight() const;
  // Drives a connection attempt until `until`: marks the link up once the
  // channel is connected.
  void TryConnect(absl::Time until);
  // Ends the current stream (Close).
  void CancelStream(const std::string& why);
  bool has_stream() const {
    MutexLock lock(&mu_);
    return stream_ != nullptr;
  }

  // Wakes whoever waits on the client's connection events.
  void Notify();
  // The stream ended with `status`.
  // `server_stopping`: the gateway said it is going away, so the channel's
  // current connection must not carry a new stream.
  void OnStreamDone(ClientStream* stream, const grpc::Status& status,
                    bool server_stopping);
  // Sends `call` (with the caller's reference) again, through whichever
  // gateway the client picks now.
  void Resend(CallBase* call);
  // The stream's very last act (after it the client may be freed).
  void StreamGone();
  bool closed() const;
  // The cluster's membership as this gateway reports it.
  absl::StatusOr<v1::MembershipView> FetchCluster(absl::Duration timeout);

 private:
  Client::Impl* const client_;
  const std::string address_;
  const ClientOptions& options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Gateway::Stub> stub_;
  mutable Mutex mu_;
  ClientStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::atomic<bool> up_{false};  // written under mu_
  std::atomic<bool> retired_{false};
  // The gateway said it stops: wait for its connection to go before using
  // the channel again.
  bool await_new_connection_ ABSL_GUARDED_BY(mu_) = false;
};

class Client::Impl {
 public:
  explicit Impl(ClientOptions options)
      : options_(std::move(options)), timers_(Clock::System()) {}

  absl::Status Init() {
    GRANARY_RETURN_IF_ERROR(timers_.Start());
    // Deadlines resume awaiting coroutines on the timer thread; a call made
    // there must not wait for room either (no other deadline could fire).
    timers_.Schedule(&mark_timer_thread_, absl::InfinitePast());
    for (const std::string& address : options_.gateways) AddGateway(address);
    reconnector_ = std::thread([this] { Reconnect(); });
    return absl::OkStatus();
  }

  ~Impl() {
    Close(absl::ZeroDuration());
    const size_t n = link_count_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) links_[i].reset();
  }

  void Register(const InterfaceInfo& iface) {
    {
      ReaderMutexLock lock(&types_mu_);
      if (types_.contains(iface.type_name.data())) return;
    }
    MutexLock lock(&types_mu_);
    types_.emplace(iface.type_name.data(), &iface);
  }

  const InterfaceInfo* FindInterface(absl::string_view type) {
    ReaderMutexLock lock(&types_mu_);
    auto it = types_.find(type.data());
    if (it != types_.end()) return it->second;
    for (const auto& [name, iface] : types_) {
      if (iface->type_name == type) return iface;
    }
    return nullptr;
  }

  void Invoke(CallBase* call);

  absl::Status WaitForConnected(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    Waiting waiting(this);
    MutexLock lock(&events_mu_);
    while (connected() == 0) {
      if (events_.WaitWithDeadline(&events_mu_, deadline) &&
          connected() == 0) {
        return absl::UnavailableError(absl::StrCat(
            "no gateway reachable within ", absl::FormatDuration(timeout),
            " (tried ", absl::StrJoin(options_.gateways, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  int connected() const {
    int n = 0;
    ForEachLink([&n](GatewayLink* link) { n += link->up() ? 1 : 0; });
    return n;
  }

  int in_flight() const {
    int n = 0;
    ForEachLink([&n](GatewayLink* link) { n += link->in_flight(); });
    return n;
  }

  // A gateway was lost (or the client closes): wake the reconnector.
  void LinkDown() {
    MutexLock lock(&reconnect_mu_);
    link_down_ = true;
    reconnect_.SignalAll();
  }

  // A stream made progress that Close or WaitForConnected may wait for.
  // Free when nobody waits (every reply and write calls it).
  void Notify() {
    if (waiters_.load(std::memory_order_seq_cst) == 0) return;
    MutexLock lock(&events_mu_);
    events_.SignalAll();
  }

  // Streams between creation and the very end of their OnDone; Close waits
  // for zero before anything they touch goes away.
  // (Counted up without events_mu_: Acquire holds a link's mutex, and Close
  // takes link mutexes under events_mu_. No stream starts once Close has
  // cancelled the links, so its wait below sees every one.)
  void StreamStarted() { live_streams_.fetch_add(1, std::memory_order_relaxed); }
  // The last thing a stream's OnDone does.
  void StreamGone() {
    MutexLock lock(&events_mu_);
    live_streams_.fetch_sub(1, std::memory_order_relaxed);
    events_.SignalAll();
  }

  // Counts a thread waiting on events_ for its scope.
  class Waiting {
   public:
    explicit Waiting(Impl* impl) : impl_(impl) {
      impl_->waiters_.fetch_add(1, std::memory_order_seq_cst);
    }
    ~Waiting() { impl_->waiters_.fetch_sub(1, std::memory_order_seq_cst); }

   private:
    Impl* impl_;
  };

  void Close(absl::Duration timeout) {
    if (closed_.exchange(true)) {
      MutexLock lock(&close_mu_);  // a concurrent Close finishes first
      return;
    }
    MutexLock close_lock(&close_mu_);
    const absl::Time deadline = absl::Now() + timeout;
    Waiting waiting(this);
    {
      MutexLock lock(&events_mu_);
      while (in_flight() > 0 && absl::Now() < deadline) {
        events_.WaitWithDeadline(&events_mu_, deadline);
      }
    }
    ForEachLink([](GatewayLink* link) {
      link->CancelStream("client closed before the reply arrived");
    });
    {
      MutexLock lock(&events_mu_);
      while (live_streams_.load(std::memory_order_relaxed) > 0) {
        events_.Wait(&events_mu_);
      }
    }
    LinkDown();  // the reconnector sees closed_
    if (reconnector_.joinable()) reconnector_.join();
    timers_.Stop();
  }

  bool closed() const { return closed_.load(std::memory_order_acquire); }
  const ClientOptions& options() const { return options_; }

 private:
  // The reconnector thread: brings down gateways back up. It waits on the
  // channels themselves, which is what makes gRPC progress their connection
  // attempts (with no call on a channel, nothing else polls it).
  void Reconnect() {
    while (!closed()) {
      std::vector<GatewayLink*> down;
      ForEachLink([&down](GatewayLink* link) {
        if (!link->up()) down.push_back(link);
      });
      if (options_.gateway_refresh_period > absl::ZeroDuration() &&
          absl::Now() >= next_refresh_) {
        if (RefreshGateways()) {
          next_refresh_ = absl::Now() + options_.gateway_refresh_period;
        }
      }
      if (down.empty()) {
        MutexLock lock(&reconnect_mu_);
        if (!closed() && !link_down_) {
          reconnect_.WaitWithDeadline(&reconnect_mu_,
                                      absl::Now() + options_.reconnect_period);
        }
        link_down_ = false;
        continue;
      }
      const absl::Duration slice = options_.reconnect_period / down.size();
      for (GatewayLink* link : down) {
        if (closed()) return;
        link->TryConnect(absl::Now() + slice);
      }
    }
  }

  template <typename Fn>
  void ForEachLink(Fn fn) const {
    const size_t n = link_count_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) fn(links_[i].get());
  }

 public:
  // Adds gateway `address` unless known (or the list is full); the
  // reconnector brings it up.
  void AddGateway(const std::string& address) {
    MutexLock lock(&links_mu_);
    const size_t n = link_count_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) {
      if (links_[i]->address() == address) return;
    }
    if (n == kMaxGateways) return;
    links_[n] = std::make_unique<GatewayLink>(this, address, options_);
    link_count_.store(n + 1, std::memory_order_release);
  }

  std::vector<std::string> gateways() const {
    std::vector<std::string> out;
    ForEachLink([&out](GatewayLink* link) { out.push_back(link->address()); });
    return out;
  }

 private:
  // Learns the cluster's gateways from the membership table, through the
  // first gateway that answers.
  bool RefreshGateways() {
    std::vector<GatewayLink*> up;
    ForEachLink([&up](GatewayLink* link) {
      if (link->up()) up.push_back(link);
    });
    for (GatewayLink* link : up) {
      absl::StatusOr<v1::MembershipView> view =
          link->FetchCluster(absl::Seconds(1));
      if (!view.ok()) continue;
      absl::flat_hash_set<std::string> dead;
      for (const v1::Member& m : view->members()) {
        if (m.status() == v1::MEMBER_DEAD) dead.insert(m.gateway());
        if (m.status() == v1::MEMBER_ACTIVE && !m.gateway().empty()) {
          std::string host;
          int port = 0;
          if (SplitHostPort(m.gateway(), &host, &port) && port != 0) {
            AddGateway(m.gateway());
            dead.erase(m.gateway());  // a new silo on the same address
          }
        }
      }
      // A gateway whose silo the cluster declared dead is not used again
      // (it may be unresponsive rather than gone) until a silo is Active
      // on that address.
      ForEachLink([&dead](GatewayLink* link) {
        link->set_retired(dead.contains(link->address()));
      });
      return true;
    }
    return false;
  }

  // Remembers that `id` lives behind `gateway` (Reply.host_gateway), if
  // that is one of this client's gateways.
 public:
  void RememberLocation(const GrainId& id, const std::string& gateway) {
    if (options_.location_cache_size == 0) return;
    GatewayLink* found = nullptr;
    ForEachLink([&](GatewayLink* link) {
      if (link->address() == gateway) found = link;
    });
    if (found == nullptr) return;
    MutexLock lock(&locations_mu_);
    if (locations_.size() >= static_cast<size_t>(options_.location_cache_size)) {
      locations_.clear();
    }
    locations_[id] = found;
  }

 private:

  // The gateway for a call to `id`: the one of the silo that hosts it when
  // known (RememberLocation), else the same one while it is up. `avoid`
  // (a gateway whose stream just ended) is taken only when no other is up.
  GatewayLink* Pick(const GrainId& id, const GatewayLink* avoid = nullptr) {
    const size_t n = link_count_.load(std::memory_order_acquire);
    if (n == 0) return nullptr;
    if (n > 1 && options_.location_cache_size > 0) {
      GatewayLink* home = nullptr;
      {
        ReaderMutexLock lock(&locations_mu_);
        auto it = locations_.find(id);
        if (it != locations_.end()) home = it->second;
      }
      if (home != nullptr && home != avoid && home->up() && !home->retired()) {
        return home;
      }
    }
    const size_t first = absl::HashOf(id) % n;
    GatewayLink* fallback = nullptr;
    for (size_t i = 0; i < n; ++i) {
      GatewayLink* link = links_[(first + i) % n].get();
      if (!link->up() || link->retired()) continue;
      if (link != avoid) return link;
      fallback = link;
    }
    return fallback;
  }

  const ClientOptions options_;
  TimerQueue timers_;
  // Gateways only ever join the list (at most kMaxGateways): a slot is
  // filled before the count that publishes it, so readers need no lock.
  static constexpr size_t kMaxGateways = 64;
  std::array<std::unique_ptr<GatewayLink>, kMaxGateways> links_;
  std::atomic<size_t> link_count_{0};
  Mutex links_mu_;  // adding gateways
  // Where grains live (RememberLocation); links are never freed before the
  // client.
  Mutex locations_mu_;
  absl::flat_hash_map<GrainId, GatewayLink*> locations_
      ABSL_GUARDED_BY(locations_mu_);
  absl::Time next_refresh_ = absl::InfinitePast();  // reconnector thread only
  struct MarkNetworkThread final : TimerEntry {
    void OnTimer() override { on_network_thread = true; }
  };
  MarkNetworkThread mark_timer_thread_;
  std::thread reconnector_;
  // Wakes the reconnector: a gateway was lost, or the client closes. (Not
  // events_, which every reply signals.)
  Mutex reconnect_mu_;
  CondVar reconnect_;
  bool link_down_ ABSL_GUARDED_BY(reconnect_mu_) = false;
  std::atomic<bool> closed_{false};
  Mutex close_mu_;

  Mutex types_mu_;
  absl::flat_hash_map<const char*, const InterfaceInfo*> types_
      ABSL_GUARDED_BY(types_mu_);

  Mutex events_mu_;
  CondVar events_;
  std::atomic<int> waiters_{0};
  std::atomic<int> live_streams_{0};
};

// --- ClientStream ------------------------------------------------------------

absl::Status ClientStream::Send(v1::Request& request, CallBase* call) {
  Actions actions;
  {
    MutexLock lock(&mu_);
    while (!dead_ && in_flight_ >= max_in_flight_) {
      if (overflow_ == ClientOptions::Overflow::kFail || on_network_thread) {
        return absl::ResourceExhaustedError(absl::StrCat(
            max_in_flight_, " calls already in flight to gateway ",
            link_->address()));
      }
      space_.Wait(&mu_);
    }
    if (dead_) {
      return absl::UnavailableError(absl::StrCat(
          "connection to gateway ", link_->address(), " was lost"));
    }
    ++in_flight_;
    if (call != nullptr) {
      const uint64_t id = next_id_++;
      request.set_id(id);
      waiting_.emplace(id, call);
    } else {
      ++pending_one_way_;
    }
    pending_.push_back(std::move(request));
    actions = AdvanceLocked();
  }
  Act(actions);
  return absl::OkStatus();
}

ClientStream::Actions ClientStream::AdvanceLocked() {
  Actions actions;
  if (write_out_ || !write_hold_) return actions;
  if (dead_) {
    write_hold_ = false;
    actions.remove_hold = true;
  } else if (!pending_.empty()) {
    size_t bytes = 0;
    int one_way = 0;
    while (!pending_.empty()) {
      const size_t b = RequestBytes(pending_.front());
      if (bytes > 0 && bytes + b > max_batch_bytes_) break;
      bytes += b;
      if (pending_.front().id() == 0) ++one_way;
      *writing_.add_requests() = std::move(pending_.front());
      pending_.pop_front();
    }
    pending_one_way_ -= one_way;
    writing_one_way_ = one_way;
    write_out_ = true;
    actions.write = true;
  }
  return actions;
}

void ClientStream::Act(Actions actions) {
  if (actions.write) StartWrite(&writing_);
  if (actions.remove_hold) RemoveHold();
}

void ClientStream::Advance() {
  Actions actions;
  {
    MutexLock lock(&mu_);
    actions = AdvanceLocked();
  }
  Act(actions);
}

void ClientStream::OnWriteDone(bool ok) {
  {
    MutexLock lock(&mu_);
    write_out_ = false;
    writing_.Clear();
    // One-way calls are done with once written.
    in_flight_ -= writing_one_way_;
    writing_one_way_ = 0;
    if (!ok) dead_ = true;
    space_.SignalAll();
  }
  Advance();
  link_->Notify();
}

void ClientStream::Finish(CallBase* call, const v1::Reply& reply) {
  if (!reply.host_gateway().empty()) {
    link_->client()->RememberLocation(call->target(), reply.host_gateway());
  }
  if (call->TryClaim()) {
    absl::Status status;
    if (reply.code() != 0) {
      status = absl::Status(static_cast<absl::StatusCode>(reply.code()),
                            reply.message());
    } else if (!call->reply().ParseFromString(reply.payload())) {
      status = absl::InternalError(absl::StrCat(
          "reply from ", call->target().ToString(), " is not a valid ",
          call->reply().GetTypeName()));
    }
    call->Deliver(std::move(status));
  }
  call->Release();
}

void ClientStream::OnReadDone(bool ok) {
  if (!ok) {
    {
      MutexLock lock(&mu_);
      dead_ = true;
      space_.SignalAll();
    }
    Advance();  // removes the write hold once no write is out
    return;
  }
  NetworkThreadScope network;
  // Claim this batch's calls under one lock, then finish them outside it.
  std::vector<std::pair<CallBase*, const v1::Reply*>> ready;
  ready.reserve(incoming_.replies_size());
  {
    MutexLock lock(&mu_);
    for (const v1::Reply& reply : incoming_.replies()) {
      auto it = waiting_.find(reply.id());
      if (it == waiting_.end()) continue;  // not ours: ignore
      ready.emplace_back(it->second, &reply);
      waiting_.erase(it);
    }
    in_flight_ -= static_cast<int>(ready.size());
    space_.SignalAll();
  }
  // Finishing resumes awaiting coroutines here, on this network thread.
  for (auto& [call, reply] : ready) Finish(call, *reply);
  incoming_.Clear();
  StartRead(&incoming_);
  link_->Notify();
}

void ClientStream::OnDone(const grpc::Status& status) {
  NetworkThreadScope network;
  absl::flat_hash_map<uint64_t, CallBase*> waiting;
  std::string why;
  {
    MutexLock lock(&mu_);
    dead_ = true;
    waiting.swap(waiting_);
    pending_.clear();
    in_flight_ = 0;
    why = cancel_reason_;
    space_.SignalAll();
  }
  if (why.empty()) {
    why = absl::StrCat("connection to gateway ", link_->address(),
                       " was lost: ", status.error_message());
  }
  const auto& trailers = context_.GetServerTrailingMetadata();
  const bool stopping =
      trailers.find("granary-gateway-stopping") != trailers.end();
  // gRPC's answer when no connection could be made for the stream at all:
  // nothing of it reached the gateway either.
  const bool never_connected =
      status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      absl::StrContains(status.error_message(),
                        "failed to connect to all addresses");
  const bool resend = (stopping || never_connected) && !link_->closed();
  if (!resend) {
    for (auto& [id, call] : waiting) {
      call->Fail(absl::UnavailableError(why));
      call->Release();
    }
  }
  link_->OnStreamDone(this, status, stopping);
  if (resend) {
    // A stopping gateway answers every request it read before it ends the
    // stream, so these never reached it: they go to another gateway
    // (without waiting for room: this is a network thread).
    for (auto& [id, call] : waiting) link_->Resend(call);
  }
  link_->StreamGone();  // last use of the link: Close may now free the client
  Unref();  // gRPC's
}

// --- GatewayLink -------------------------------------------------------------

GatewayLink::GatewayLink(Client::Impl* client, std::string address,
                         const ClientOptions& options)
    : client_(client), address_(std::move(address)), options_(options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Reconnect promptly: the client retries lost gateways on its own period.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A channel of its own per client, so two clients never share a stream.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  channel_ = grpc::CreateCustomChannel(address_,
                                       grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Gateway::NewStub(channel_);
}

GatewayLink::~GatewayLink() = default;

ClientStream* GatewayLink::Acquire() {
  MutexLock lock(&mu_);
  if (!up_ || client_->closed()) return nullptr;
  if (stream_ == nullptr) {
    client_->StreamStarted();
    stream_ = new ClientStream(this, options_);
    stream_->Start(stub_.get());
  }
  stream_->Ref();
  return stream_;
}

int GatewayLink::in_flight() const {
  MutexLock lock(&mu_);
  return stream_ == nullptr ? 0 : stream_->in_flight();
}

void GatewayLink::TryConnect(absl::Time until) {
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    // The client has its own retry period; skip gRPC's backoff.
    grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
  }
  // Waiting on the channel is what progresses its connection attempt; an
  // attempt that fails waits out the rest of the slice (no busy retry).
  bool await_new;
  {
    MutexLock lock(&mu_);
    await_new = await_new_connection_;
  }
  // A gateway that said it stops keeps its connection open for a while: a
  // READY channel is only good again once that connection has gone.
  while (await_new && state == GRPC_CHANNEL_READY &&
         channel_->WaitForStateChange(state, absl::ToChronoTime(until))) {
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  if (await_new && state != GRPC_CHANNEL_READY) {
    MutexLock lock(&mu_);
    await_new_connection_ = false;
    await_new = false;
  }
  if (await_new) return;  // still the old connection; try again later
  while (state != GRPC_CHANNEL_READY &&
         channel_->WaitForStateChange(state, absl::ToChronoTime(until))) {
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  if (state == GRPC_CHANNEL_READY) {
    bool was_up;
    {
      MutexLock lock(&mu_);
      was_up = up_.exchange(true);
    }
    if (!was_up) {
      GRANARY_LOG(kInfo) << "client: connected to gateway " << address_;
      client_->Notify();
    }
  }
}

void GatewayLink::CancelStream(const std::string& why) {
  ClientStream* stream;
  {
    MutexLock lock(&mu_);
    up_.store(false);
    stream = stream_;
    if (stream != nullptr) stream->Ref();
  }
  if (stream != nullptr) {
    stream->Cancel(why);
    stream->Unref();
  }
}

void GatewayLink::OnStreamDone(ClientStream* stream,
                               const grpc::Status& status,
                               bool server_stopping) {
  {
    MutexLock lock(&mu_);
    if (server_stopping) await_new_connection_ = true;
    if (stream_ == stream) {
      stream_ = nullptr;
      // Any end we did not ask for means the gateway went away or is
      // going: send nothing more here until the channel is connected again.
      if (!client_->closed()) {
        up_.store(false);
        GRANARY_LOG(kWarning) << "client: lost gateway " << address_ << ": "
                              << status.error_message();
      }
    }
  }
  stream->Unref();  // the link's
  client_->LinkDown();
  client_->Notify();
}

void GatewayLink::StreamGone() { client_->StreamGone(); }

void GatewayLink::Notify() { client_->Notify(); }

void GatewayLink::Resend(CallBase* call) { client_->Invoke(call); }

bool GatewayLink::closed() const { return client_->closed(); }

absl::StatusOr<v1::MembershipView> GatewayLink::FetchCluster(
    absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::MembershipView view;
  grpc::Status s = stub_->Cluster(&context, v1::ClusterRequest(), &view);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        s.error_message());
  }
  return view;
}

// --- Client::Impl::Invoke ----------------------------------------------------

void Client::Impl::Invoke(CallBase* call) {
  // We own one reference on `call`.
  auto fail = [call](absl::Status status) {
    call->Fail(std::move(status));
    call->Release();
  };
  if (closed()) {
    return fail(absl::Status(options_.closed_code, "the client is closed"));
  }
  const InterfaceInfo* iface = FindInterface(call->target().type());
  // A reminder tick a silo passes to the grain's silo (core/call.h).
  const bool reminder_tick = call->method() == kReminderMethod;
  if (iface == nullptr ||
      (call->method() >= iface->method_count && !reminder_tick)) {
    return fail(absl::UnimplementedError(absl::StrCat(
        "grain type ", call->target().type(), " method #", call->method(),
        " is not registered with this client (obtain references with "
        "Client::Get)")));
  }
  if (absl::Status valid = ValidateGrainKey(call->target().key());
      !valid.ok()) {
    return fail(std::move(valid));
  }
  v1::Request request;
  request.set_method(reminder_tick
                         ? ReminderMethodPath(iface->type_name)
                         : std::string(iface->methods[call->method()].full_name));
  request.set_key(call->target().key());
  if (!call->request().SerializeToString(request.mutable_payload())) {
    return fail(absl::InvalidArgumentError("request failed to serialize"));
  }
  if (RequestBytes(request) + 1024 >
      static_cast<size_t>(options_.max_message_bytes)) {
    return fail(absl::ResourceExhaustedError(absl::StrCat(
        "request to ", call->target().ToString(), " is ",
        request.payload().size(), " bytes, over the message limit of ",
        options_.max_message_bytes)));
  }
  request.set_hops(call->hops());
  request.set_chain_id(call->request_context().chain_id);
  // A call a silo forwards already has its deadline running there: the
  // next silo gets what is left of it, and no second timer is armed.
  const bool armed = call->deadline_armed();
  if (!call->one_way()) {
    const absl::Duration timeout =
        armed ? call->deadline() - absl::Now() : call->timeout();
    request.set_timeout_us(static_cast<uint64_t>(
        std::max<int64_t>(1, absl::ToInt64Microseconds(timeout))));
  }
  const bool one_way = call->one_way();
  GatewayLink* failed = nullptr;
  for (int attempt = 0;; ++attempt) {
    GatewayLink* link = Pick(call->target(), failed);
    ClientStream* stream = link == nullptr ? nullptr : link->Acquire();
    if (stream == nullptr) {
      return fail(absl::UnavailableError(
          absl::StrCat("no gateway is reachable (",
                       absl::StrJoin(gateways(), ", "), ")")));
    }
    if (attempt == 0 && !one_way && !armed) {
      call->set_deadline(absl::Now() + call->timeout());
      call->ArmDeadline(&timers_);
    }
    // Once sent, an awaited call may be answered and freed on another
    // thread before Send returns: do not touch it after a successful send.
    absl::Status sent = stream->Send(request, one_way ? nullptr : call);
    stream->Unref();
    if (sent.ok()) break;
    // UNAVAILABLE: the stream ended before it took the request, which
    // therefore went nowhere; another gateway (or a new stream) may take it.
    if (sent.code() != absl::StatusCode::kUnavailable || attempt == 3) {
      return fail(std::move(sent));
    }
    failed = link;
  }
  if (one_way) call->Release();  // written from the request copy
}

// --- Client ------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  if (options.gateways.empty()) {
    return absl::InvalidArgumentError("no gateway address given");
  }
  for (const std::string& address : options.gateways) {
    std::string host;
    int port = 0;
    if (!SplitHostPort(address, &host, &port) || port == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gateway address '", address, "' is not HOST:PORT"));
    }
  }
  if (options.max_in_flight < 1) {
    return absl::InvalidArgumentError("max_in_flight must be positive");
  }
  if (options.max_message_bytes < 4096) {
    return absl::InvalidArgumentError(
        "max_message_bytes must be at least 4096");
  }
  if (options.gateway_refresh_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "gateway_refresh_period must not be negative");
  }
  if (options.location_cache_size < 0) {
    return absl::InvalidArgumentError(
        "location_cache_size must not be negative");
  }
  if (options.reconnect_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("reconnect_period must be positive");
  }
  const absl::Duration timeout = options.connect_timeout;
  InitProcess();
  HoldGrpcCallbackQueue();
  auto impl = std::make_unique<Impl>(std::move(options));
  GRANARY_RETURN_IF_ERROR(impl->Init());
  GRANARY_RETURN_IF_ERROR(impl->WaitForConnected(timeout));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() = default;

void Client::Register(const InterfaceInfo& iface) { impl_->Register(iface); }

void Client::Invoke(CallBase* call) { impl_->Invoke(call); }

absl::Status Client::WaitForConnected(absl::Duration timeout) {
  return impl_->WaitForConnected(timeout);
}

int Client::connected_gateways() const { return impl_->connected(); }

std::vector<std::string> Client::gateways() const { return impl_->gateways(); }

int Client::in_flight() const { return impl_->in_flight(); }

void Client::Close(absl::Duration timeout) { impl_->Close(timeout); }

}  // namespace granary
