// File: rpc/gateway_set.h
// -----------------------------------------------------------------------------
// The gateways a caller sends grain calls through: a connection to each
// (rpc/gateway_connection.h), a reconnector (rpc/reconnector.h) that brings
// lost ones back, discovery of the cluster's other gateways, and the cache of
// where grains live. The client SDK (client/client.h) is a façade over one; a
// silo holds one per peer silo (silo/cluster/grpc_transport.h).
//
//   GatewaySet set(options);
//   GRANARY_RETURN_IF_ERROR(set.Start());
//   GRANARY_RETURN_IF_ERROR(set.WaitForConnected(absl::Seconds(5)));
//   set.Register(CounterRef::Interface());
//   set.Invoke(call);
//   set.Close(absl::Seconds(10));
//
// A grain's calls take the same live gateway (hash of the grain id) unless
// a reply named the gateway of the silo hosting it. A gateway whose stream
// ends fails its calls in flight UNAVAILABLE at once; calls that never
// reached it (the gateway was stopping, or no connection was made) go to
// another gateway.
//
// Threading: thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/address.h"
#include "core/call.h"
#include "core/clock.h"
#include "core/grain_interface.h"
#include "core/status.h"
#include "core/sync.h"
#include "core/thread_top.h"
#include "core/timer_queue.h"
#include "rpc/gateway_connection.h"
#include "rpc/gateway_options.h"
#include "rpc/reconnector.h"

namespace granary::rpc {

// OK, or INVALID_ARGUMENT naming the first bad option.
absl::Status ValidateGatewaySetOptions(const GatewaySetOptions& options);

class GatewaySet {
 public:
  // Validates `options`, starts a set and waits up to connect_timeout for a
  // gateway: INVALID_ARGUMENT for bad options, UNAVAILABLE when no gateway
  // accepts a connection by then.
  static absl::StatusOr<std::unique_ptr<GatewaySet>> Connect(
      GatewaySetOptions options);

  explicit GatewaySet(GatewaySetOptions options)
      : options_(std::move(options)),
        timers_(options_.clock != nullptr ? options_.clock : Clock::System(),
                options_.timer_thread),
        reconnector_(options_.reconnector != nullptr
                         ? options_.reconnector
                         : std::make_shared<Reconnector>()) {}

  // Starts the timers and the connection attempts (and the timer and
  // reconnector threads, unless the options share a silo's).
  absl::Status Start() {
    GRANARY_RETURN_IF_ERROR(timers_.Start());
    // Deadlines resume awaiting coroutines on the timer thread; a call made
    // there must not wait for room either (no other deadline could fire).
    timers_.Schedule(&mark_timer_thread_, absl::InfinitePast());
    for (const std::string& address : options_.gateways) AddGateway(address);
    if (options_.reconnector == nullptr) {
      GRANARY_RETURN_IF_ERROR(reconnector_->Start());
    }
    reconnector_->Add(this);
    return absl::OkStatus();
  }

  ~GatewaySet() {
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
      if (events_.WaitWithDeadline(&events_mu_, deadline) && connected() == 0) {
        return absl::UnavailableError(absl::StrCat(
            "no gateway reachable within ", absl::FormatDuration(timeout),
            " (tried ", absl::StrJoin(options_.gateways, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  int connected() const {
    int n = 0;
    ForEachLink([&n](GatewayConnection* link) { n += link->up() ? 1 : 0; });
    return n;
  }

  int in_flight() const {
    int n = 0;
    ForEachLink([&n](GatewayConnection* link) { n += link->in_flight(); });
    return n;
  }

  // A gateway was lost (or the client closes): wake the reconnector.
  void LinkDown() { reconnector_->Wake(); }

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
  void StreamStarted() {
    live_streams_.fetch_add(1, std::memory_order_relaxed);
  }
  // The last thing a stream's OnDone does.
  void StreamGone() {
    MutexLock lock(&events_mu_);
    live_streams_.fetch_sub(1, std::memory_order_relaxed);
    events_.SignalAll();
  }

  // Counts a thread waiting on events_ for its scope.
  class Waiting {
   public:
    explicit Waiting(GatewaySet* impl) : impl_(impl) {
      impl_->waiters_.fetch_add(1, std::memory_order_seq_cst);
    }
    ~Waiting() { impl_->waiters_.fetch_sub(1, std::memory_order_seq_cst); }

   private:
    GatewaySet* impl_;
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
    ForEachLink([](GatewayConnection* link) {
      link->CancelStream("client closed before the reply arrived");
    });
    {
      MutexLock lock(&events_mu_);
      while (live_streams_.load(std::memory_order_relaxed) > 0) {
        events_.Wait(&events_mu_);
      }
    }
    reconnector_->Remove(this);
    if (options_.reconnector == nullptr) reconnector_->Stop();
    timers_.Stop();
  }

  bool closed() const { return closed_.load(std::memory_order_acquire); }
  const GatewaySetOptions& options() const { return options_; }

 private:
  friend class Reconnector;
  // A round of the reconnector (rpc/reconnector.h): refreshes the list of
  // gateways when due, hands on the calls of connections their gateway
  // told to go (GOAWAY), and returns the links that are down.
  std::vector<GatewayConnection*> Tend() {
    std::vector<GatewayConnection*> down;
    if (closed()) return down;
    ForEachLink([&down](GatewayConnection* link) {
      if (!link->up()) down.push_back(link);
    });
    if (options_.gateway_refresh_period > absl::ZeroDuration() &&
        absl::Now() >= next_refresh_) {
      if (RefreshGateways()) {
        next_refresh_ = absl::Now() + options_.gateway_refresh_period;
      }
    }
    ForEachLink([](GatewayConnection* link) {
      if (link->up()) link->CheckConnection();
    });
    return down;
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
    // A discovered gateway off loopback would get the token in clear text.
    if (!CheckTokenTransport(options_.security, address).ok()) return;
    links_[n] = std::make_unique<GatewayConnection>(this, address, options_);
    link_count_.store(n + 1, std::memory_order_release);
  }

  std::vector<std::string> gateways() const {
    std::vector<std::string> out;
    ForEachLink(
        [&out](GatewayConnection* link) { out.push_back(link->address()); });
    return out;
  }

 private:
  // Learns the cluster's gateways from the membership table, through the
  // first gateway that answers.
  bool RefreshGateways() {
    std::vector<GatewayConnection*> up;
    ForEachLink([&up](GatewayConnection* link) {
      if (link->up()) up.push_back(link);
    });
    for (GatewayConnection* link : up) {
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
      ForEachLink([&dead](GatewayConnection* link) {
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
    GatewayConnection* found = nullptr;
    ForEachLink([&](GatewayConnection* link) {
      if (link->address() == gateway) found = link;
    });
    if (found == nullptr) return;
    MutexLock lock(&locations_mu_);
    if (locations_.size() >=
        static_cast<size_t>(options_.location_cache_size)) {
      locations_.clear();
    }
    locations_[id] = found;
  }

 private:
  // The gateway for a call to `id`: the one of the silo that hosts it when
  // known (RememberLocation), else the same one while it is up. `avoid`
  // (a gateway whose stream just ended) is taken only when no other is up.
  GatewayConnection* Pick(const GrainId& id,
                          const GatewayConnection* avoid = nullptr) {
    const size_t n = link_count_.load(std::memory_order_acquire);
    if (n == 0) return nullptr;
    if (n > 1 && options_.location_cache_size > 0) {
      GatewayConnection* home = nullptr;
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
    GatewayConnection* fallback = nullptr;
    for (size_t i = 0; i < n; ++i) {
      GatewayConnection* link = links_[(first + i) % n].get();
      if (!link->up() || link->retired()) continue;
      if (link != avoid) return link;
      fallback = link;
    }
    return fallback;
  }

  const GatewaySetOptions options_;
  TimerQueue timers_;
  // Gateways only ever join the list (at most kMaxGateways): a slot is
  // filled before the count that publishes it, so readers need no lock.
  static constexpr size_t kMaxGateways = 64;
  std::array<std::unique_ptr<GatewayConnection>, kMaxGateways> links_;
  std::atomic<size_t> link_count_{0};
  Mutex links_mu_;  // adding gateways
  // Where grains live (RememberLocation); links are never freed before the
  // client.
  Mutex locations_mu_;
  absl::flat_hash_map<GrainId, GatewayConnection*> locations_
      ABSL_GUARDED_BY(locations_mu_);
  absl::Time next_refresh_ = absl::InfinitePast();  // reconnector thread only
  struct MarkNetworkThread final : TimerEntry {
    void OnTimer() override { MarkNetworkThread(); }
  };
  MarkNetworkThread mark_timer_thread_;
  // This set's own, or the silo's (GatewaySetOptions::reconnector).
  const std::shared_ptr<Reconnector> reconnector_;
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

}  // namespace granary::rpc
