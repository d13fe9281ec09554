// File: silo/gateway/gateway_service_impl.h
// -----------------------------------------------------------------------------
// Private to silo/gateway: the gRPC service behind GatewayService
// (silo/gateway/gateway_service.h), shared by the stream reactor
// (gateway_server_stream.{h,cc}, made in gateway_service.cc) and the unary
// Status and Cluster calls (gateway_status.cc).
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/grain_interface.h"
#include "core/sync.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "silo/gateway/gateway_service.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {
namespace gateway_internal {

// Trailing metadata of a stream the gateway ends because it stops.
inline constexpr char kStoppingKey[] = "granary-gateway-stopping";

struct Route {
  const InterfaceInfo* iface;
  const MethodInfo* method;
  // A call this silo cannot decode, passed on opaquely (core/opaque_call.h):
  // its type's interned name, and the least version its host needs.
  absl::string_view opaque_type = {};
  uint32_t min_version = 0;
};

// Memory a queued reply holds, near enough for the budgets that bound it
// and for cutting batches: the message object and its slot in the queue,
// and for each bytes field that is set a heap string (its buffer too past
// the 15 bytes a string keeps inline). Charging only the wire bytes let a
// client that never reads hold five times its budget in small replies.
inline size_t ReplyBytes(const v1::Reply& r) {
  const auto field = [](const std::string& s) -> size_t {
    return s.empty() ? 0 : 48 + (s.size() > 15 ? s.size() : 0);
  };
  return sizeof(v1::Reply) + 16 + field(r.payload()) + field(r.message()) +
         field(r.host_gateway());
}

// A Gateway stream refused at once: before the service has its silo, or
// with max_streams open.
class RefusedStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedStream(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace gateway_internal

using gateway_internal::kStoppingKey;
using gateway_internal::RefusedStream;
using gateway_internal::ReplyBytes;
using gateway_internal::Route;

class GatewayServerStream;

// Connect is served raw (bytes in, bytes out) so that a batch which does not
// decode ends its stream with INVALID_ARGUMENT rather than looking like the
// client's half-close.
class GatewayService::Impl final
    : public v1::Gateway::WithRawCallbackMethod_Connect<
          v1::Gateway::WithCallbackMethod_Status<
              v1::Gateway::WithCallbackMethod_Cluster<v1::Gateway::Service>>> {
 public:
  Impl(Runtime* silo, GatewayServiceOptions options)
      : options_(std::move(options)),
        started_(absl::Now()),
        address_(options_.address) {
    if (silo != nullptr) Attach(silo);
  }

  // Once: the silo whose grains this service serves. Calls before it are
  // answered UNAVAILABLE.
  void Attach(Runtime* silo) {
    for (const GrainClassInfo* info : silo->KnownTypes()) {
      const InterfaceInfo* iface = info->interface;
      for (size_t i = 0; i < iface->method_count; ++i) {
        routes_.emplace(std::string(iface->methods[i].full_name),
                        Route{iface, &iface->methods[i]});
      }
      // Reminder ticks of a cluster's primary (core/call.h), from silos
      // only: no client can send one.
      if (options_.from_silos) {
        routes_.emplace(ReminderMethodPath(iface->type_name),
                        Route{iface, nullptr});
      }
    }
    silo_.store(silo, std::memory_order_release);  // publishes routes_
  }

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Connect(
      grpc::CallbackServerContext* context) override;

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const v1::StatusRequest* request,
                                   v1::SiloStatus* reply) override;
  grpc::ServerUnaryReactor* Cluster(grpc::CallbackServerContext* context,
                                    const v1::ClusterRequest* request,
                                    v1::MembershipView* reply) override;

  const Route* FindRoute(const std::string& path) const {
    auto it = routes_.find(path);
    return it == routes_.end() ? nullptr : &it->second;
  }

  void Drain();
  void Stop();
  // Sets `flag` (draining_ or stopping_, guarded by mu_) and calls `tell`
  // on every open stream, outside mu_.
  void SetAndTellStreams(bool* flag, void (GatewayServerStream::*tell)());
  void Forget(GatewayServerStream* stream) {
    MutexLock lock(&mu_);
    if (streams_.erase(stream) > 0) {
      silo()->internals().metrics().gateway_connections->Add(-1);
    }
  }
  int open_streams() const {
    MutexLock lock(&mu_);
    return static_cast<int>(streams_.size());
  }
  bool WaitForStreamsClosed(absl::Duration timeout) {
    MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return streams_.empty(); },
        timeout);
  }

  Runtime* silo() const { return silo_.load(std::memory_order_acquire); }
  const GatewayServiceOptions& options() const { return options_; }
  void set_address(std::string a) {
    MutexLock lock(&mu_);
    address_ = std::move(a);
  }
  std::string address() const {
    MutexLock lock(&mu_);
    return address_;
  }

 private:
  std::atomic<Runtime*> silo_{nullptr};
  GatewayServiceOptions options_;
  const absl::Time started_;
  absl::flat_hash_map<std::string, Route> routes_;
  mutable Mutex mu_;
  absl::flat_hash_set<GatewayServerStream*> streams_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::string address_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::silo
