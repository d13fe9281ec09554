// File: silo/gateway/gateway_server_stream.h
// -----------------------------------------------------------------------------
// Private to silo/gateway: GatewayServerStream, the reactor of one client's (or
// another silo's) Gateway.Connect stream. GatewayService::Impl::Connect
// makes one per stream (gateway_service.cc); the methods that read, route,
// write and finish are in gateway_server_stream.cc.
//
//   auto* stream = new GatewayServerStream(impl, context, stopping, draining);
//   stream->Begin();   // starts the first read
//   return stream;     // gRPC holds a reference until OnDone
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "core/sync.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "silo/gateway/gateway_call.h"
#include "silo/gateway/gateway_service_impl.h"

namespace granary::silo {

// One client connection. References: one held by gRPC until OnDone, one per
// call accepted and not yet finished; the last one deletes the stream.
//
// State (all under mu_) moves the stream along; Advance() looks at it and
// starts whatever gRPC operation is due, outside the lock:
//   read   when no read is out, the client has not half-closed, the stream
//          is healthy and fewer than max_in_flight calls are unfinished;
//   write  when no write is out and replies are pending;
//   finish once, when no write is out and either the stream broke, or the
//          gateway is stopping / the client half-closed and every accepted
//          call has been answered and written.
// A draining gateway (shutting down) tells the client once, in a batch of
// its own or with replies, and goes on reading until the client
// half-closes; Stop then ends what is left (see gateway.proto, "Shutdown").
class GatewayServerStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public MemoryBudget::Waiter,
      public ServedStreams::Owner {
 public:
  GatewayServerStream(GatewayService::Impl* service,
                      grpc::CallbackServerContext* context, bool stopping,
                      bool draining)
      : service_(service),
        silo_(service->silo()),
        context_(context),
        peer_(context->peer()),
        caller_(CallerOf(*context)),
        max_in_flight_(service->options().max_in_flight),
        max_message_bytes_(service->options().max_message_bytes),
        max_batch_bytes_(service->options().max_batch_bytes),
        max_connection_bytes_(service->options().max_connection_bytes),
        // Links from other silos are bounded by their own budget only: a
        // silo's memory pressure must not stop the calls that would finish
        // its own (a call chain through another silo and back).
        silo_budget_(service->options().from_silos
                         ? nullptr
                         : &service->silo()->internals().remote_memory()),
        from_silos_(service->options().from_silos),
        stopping_(stopping),
        draining_(draining),
        notice_due_(draining) {}

  // Logs an authenticated client's stream and starts the first read.
  void Begin();

  // " identity=..." for log lines about this stream's client, or nothing.
  std::string Identity() const;

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // The gateway is going: tell the client, which half-closes the stream
  // once it has sent what it queued here.
  void Drain();

  bool Going() {
    MutexLock l(&mu_);
    return draining_ || stopping_;
  }

  // The gateway is stopping: read nothing more, finish once drained.
  void Stop();

  void OnReadDone(bool ok) override;

  void OnWriteDone(bool ok) override {
    int64_t written;
    {
      MutexLock lock(&mu_);
      write_in_flight_ = false;
      writing_.Clear();
      outgoing_.Clear();
      written = writing_bytes_;
      writing_bytes_ = 0;
      if (!ok) Break();
    }
    bytes_.Release(written);
    Advance();
  }

  void OnCancel() override {
    {
      MutexLock lock(&mu_);
      Break();
    }
    Advance();
  }

  void OnDone() override;

  // The silo's budget is under its limit again (MemoryBudget::Waiter).
  void Wake() override {
    {
      MutexLock lock(&mu_);
      budget_wait_ = false;
    }
    Advance();
    Unref();  // the waiter's reference
  }

  // ServedStreams::Owner: items of the streams this stream serves.
  void EmitItems(std::vector<v1::Reply>* items) override {
    MutexLock lock(&mu_);
    for (v1::Reply& r : *items) QueueLocked(std::move(r));
  }
  void ItemsEmitted() override { Advance(); }
  int64_t ItemRoom() const override {
    return bytes_.Room(max_connection_bytes_);
  }
  void HoldOwner() override { Ref(); }
  void ReleaseOwner() override { Unref(); }

  // A call accepted from this stream finished (any worker thread).
  static void CallDone(void* ctx, CallBase* call) {
    auto* self = static_cast<GatewayServerStream*>(ctx);
    self->Finished(call);
    self->Unref();
  }

 private:
  ~GatewayServerStream() override;

  // Requires mu_: queues `reply` to write (dropped once broken).
  void QueueLocked(v1::Reply reply) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (broken_) return;
    const int64_t bytes = ReplyBytes(reply);
    pending_bytes_ += bytes;
    bytes_.Charge(bytes);
    pending_.push_back(std::move(reply));
  }

  // Requires mu_. The client is gone or the stream failed: replies from now
  // on are dropped.
  void Break(grpc::Status why = grpc::Status(grpc::StatusCode::CANCELLED,
                                             "stream broken"))
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!broken_) broken_status_ = std::move(why);
    broken_ = true;
    pending_.clear();
    to_release_ += pending_bytes_;  // Advance gives it back, unlocked
    pending_bytes_ = 0;
  }

  void Finished(CallBase* call);

  // Routes every request of the batch just read. The batch was read because
  // fewer than max_in_flight calls were unfinished; all of it is accepted
  // (bad requests get their error reply), so the stream holds at most
  // max_in_flight calls plus one batch, and nothing is dropped.
  void Dispatch();

  // The route of `method`; consecutive requests usually share it.
  const Route* FindRoute(const std::string& method) {
    if (last_route_ == nullptr || method != last_method_) {
      last_route_ = service_->FindRoute(method);
      last_method_ = method;
    }
    return last_route_;
  }

  // Starts one request, or says why not.
  absl::Status Accept(v1::Request& request, bool stopping);

  // Starts what is due (PlanLocked); then, without mu_, gives back what
  // Break dropped and waits for the silo's budget when it stopped reading.
  void Advance();

  // What Advance does once mu_ is released.
  struct Steps {
    int64_t release = 0;           // bytes Break dropped
    bool wait_for_budget = false;  // register with the silo's budget
    bool stop_waiting = false;     // finished: leave the budget's waiters
    bool cancel_streams = false;   // broken: the client reads no more items
  };

  // Requires mu_: decides what is due and starts the gRPC operations.
  void PlanLocked(Steps* steps) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Requires mu_: moves pending replies into the batch to write, up to about
  // max_batch_bytes (always at least one), and the drain notice when due.
  void FillWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The service is only used until OnDone (the server outlives its
  // streams' reactions); calls that finish later touch only the stream.
  GatewayService::Impl* const service_;
  Runtime* const silo_;
  grpc::CallbackServerContext* const context_;  // valid until OnDone
  const std::string peer_;
  // The identity the client was accepted with (null: anonymous).
  const std::shared_ptr<const std::string> caller_;
  const int max_in_flight_;
  const int max_message_bytes_;
  const int max_batch_bytes_;
  const int64_t max_connection_bytes_;
  MemoryBudget* const silo_budget_;  // null for links from other silos
  const bool from_silos_;
  std::atomic<int> refs_{1};
  OpenCalls open_;              // awaited calls, for the client's cancels
  ServedStreams served_{this};  // server-streaming calls: items and credit

  // Touched only by the read side (one read at a time).
  grpc::ByteBuffer incoming_;
  v1::RequestBatch batch_;
  std::string last_method_;
  const Route* last_route_ = nullptr;
  // OK replies to one-way calls another silo passed on opaquely, queued
  // with the batch's refusals (Accept and Dispatch: the reader only).
  std::vector<v1::Reply> early_;
  // Owned by the write in flight.
  v1::ReplyBatch writing_;
  grpc::ByteBuffer outgoing_;

  Mutex mu_;
  std::deque<v1::Reply> pending_ ABSL_GUARDED_BY(mu_);
  // Accepted calls not finished yet. Atomic so that one-way completions
  // need not lock; Advance reads it under mu_.
  std::atomic<int> in_flight_{0};
  // Bytes this stream holds (its budget, max_connection_bytes): accepted
  // calls not finished (their charge) and replies not yet written. Atomic
  // like in_flight_.
  ConnectionBytes bytes_{silo_budget_};             // never released under mu_
  int64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // in pending_
  int64_t writing_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // in the write out
  int64_t to_release_ ABSL_GUARDED_BY(mu_) = 0;     // dropped by Break
  bool paused_ ABSL_GUARDED_BY(mu_) = false;        // over a budget
  bool budget_wait_ ABSL_GUARDED_BY(mu_) = false;   // registered to Wake
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  // A batch just read is being handed to the silo (OnReadDone).
  bool dispatching_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Shutting down: the client was (or is about to be) told so.
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool notice_due_ ABSL_GUARDED_BY(mu_) = false;  // not written yet
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool streams_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status broken_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary::silo
