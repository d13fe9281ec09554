// File: rpc/gateway_client_stream.h
// -----------------------------------------------------------------------------
// One `granary.v1.Gateway/Connect` stream from a caller (a client, or a silo
// calling its peers) to a gateway: calls go out in batches, replies come back
// in batches and finish the calls they answer. Owned by its
// GatewayConnection (rpc/gateway_connection.h).
//
//   GatewayClientStream* stream = connection->Acquire();   // a reference
//   absl::Status sent = stream->Send(request, call); // UNAVAILABLE: lost
//                                                    // or draining
//   stream->Unref();
//
// Threading: Send from any thread; gRPC runs the reactions.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "core/call.h"
#include "core/sync.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "rpc/credentials.h"
#include "rpc/gateway_options.h"

namespace granary::rpc {

class GatewayConnection;

// True while this thread runs a reaction of a gateway stream (a network
// thread) or a call deadline. Calls made there must not block on flow
// control.
bool OnNetworkThread();
// Marks this thread as one on which calls must not block, for good.
void MarkNetworkThread();

// Marks this thread a network thread for its scope.
class NetworkThreadScope {
 public:
  NetworkThreadScope();
  ~NetworkThreadScope();

 private:
  bool saved_;
};

// The bytes of `r`'s request context, trace, caller and calling grain.
inline size_t RequestContextBytes(const v1::Request& r) {
  size_t n = r.trace().size() + r.traceparent().size() + r.caller().size() +
             r.caller_grain().size();
  for (const v1::ContextEntry& e : r.context()) {
    n += e.key().size() + e.value().size() + 6;
  }
  return n;
}

// The bytes `r` takes in a batch (for cutting batches under the limit).
inline size_t RequestBytes(const v1::Request& r) {
  return r.payload().size() + r.key().size() + r.method().size() + 24 +
         RequestContextBytes(r);
}

inline constexpr size_t kMaxBatchBytes = 1 << 20;

// One `Gateway/Connect` stream. References: one held by its link until the
// stream is done, one by gRPC until OnDone, and short-lived ones by callers
// sending on it; the last deletes it.
//
// Writes come from any thread: a hold taken before StartCall keeps the stream
// alive while writes may still start; it is removed once the stream is dead
// and no write is out. Reads run back to back inside the reactions.
class GatewayClientStream final
    : public grpc::ClientBidiReactor<v1::RequestBatch, v1::ReplyBatch>,
      public CancelForwarder {
 public:
  GatewayClientStream(GatewayConnection* link, const GatewaySetOptions& options)
      : link_(link),
        max_in_flight_(options.max_in_flight),
        overflow_(options.overflow),
        max_batch_bytes_(std::min<size_t>(
            kMaxBatchBytes,
            static_cast<size_t>(options.max_message_bytes) / 2)) {
    AddCallToken(&context_, options.security);
  }

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
  // stream's end, and a cancel of it is sent on (RequestBatch.cancels); a
  // call cancelled already is not sent (and its reference let go). Fails
  // with UNAVAILABLE when the stream is gone and RESOURCE_EXHAUSTED on
  // overflow. An awaited call that comes after the stream failed but before
  // its end status is in is not written: it waits for that status, and then
  // fails with it when the gateway refused the client's credentials, or
  // goes to another gateway.
  absl::Status Send(v1::Request& request, CallBase* call);

  // CancelForwarder: the call sent as `id` was cancelled.
  void ForwardCancel(uint64_t id) override;
  // The consumer of server-streaming call `id` read `n` items: the gateway
  // may send that many more (RequestBatch.credits).
  void GrantCredit(uint64_t id, uint32_t n);

  // The connection under the stream was told to go (GOAWAY: the gateway's
  // maximum connection age): as when the gateway drains the stream, new
  // calls go elsewhere, what is queued is written, then the stream is
  // half-closed while its calls in flight are still answered. False when
  // it drains or ended already.
  bool DrainFromClient();

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
  void OnWritesDoneDone(bool /*ok*/) override {}
  void OnDone(const grpc::Status& status) override;

 private:
  ~GatewayClientStream() override = default;

  // What Advance decided, to be done outside mu_.
  struct Actions {
    bool write = false;
    bool writes_done = false;  // half-close (a draining gateway)
    bool remove_hold = false;
  };
  Actions AdvanceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Send after the forwarder is set: queues `request` (call sent as `id`).
  absl::Status Enqueue(v1::Request& request, CallBase* call, uint64_t id);
  void Act(Actions actions);
  void Advance();
  void Finish(CallBase* call, const v1::Reply& reply);
  // An item of streaming `call` came: into its channel.
  void PushItem(CallBase* call, const v1::Reply& reply);
  // `call` leaves waiting_: no cancel of it is sent from now on.
  void Forget(CallBase* call) {
    if (call->ClearForwarder() != nullptr) Unref();  // the forwarder's
  }

  GatewayConnection* const link_;
  const int max_in_flight_;
  const GatewaySetOptions::Overflow overflow_;
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
  // Cancels to send; only for ids in waiting_, each once.
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mu_);
  // Stream credit to send (id, n); only for ids in waiting_.
  std::vector<std::pair<uint64_t, uint32_t>> credits_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> next_id_{1};
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  v1::RequestBatch writing_;  // owned by the write out
  int writing_one_way_ ABSL_GUARDED_BY(mu_) = 0;
  bool write_out_ ABSL_GUARDED_BY(mu_) = false;
  bool write_hold_ ABSL_GUARDED_BY(mu_) = true;
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  // OnDone ran: the stream's end status is known (dead_ comes first, from a
  // failed read or write).
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  // Calls in waiting_ that came between dead_ and done_: never written.
  absl::flat_hash_set<uint64_t> unsent_ ABSL_GUARDED_BY(mu_);
  // The gateway said it is shutting down (ReplyBatch.draining): nothing new
  // is sent here; the stream is half-closed once the queue is written.
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::string cancel_reason_ ABSL_GUARDED_BY(mu_);
  // The gateway's answer when it refused the client's credentials: calls
  // sent after the stream ended get it too, not "connection lost".
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::rpc
