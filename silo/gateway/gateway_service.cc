#include "silo/gateway/gateway_service.h"
#include "silo/gateway/gateway_service_impl.h"
#include "silo/gateway/gateway_call.h"

#include <atomic>
#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/call.h"
#include "core/grain_interface.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/sync.h"
#include "rpc/credentials.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "core/metrics.h"
#include "silo/runtime/grain.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/silo.h"

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
class GatewayStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public MemoryBudget::Waiter,
      public ServedStreams::Owner {
 public:
  GatewayStream(GatewayService::Impl* service,
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
                         : &service->silo()->remote_memory()),
        from_silos_(service->options().from_silos),
        stopping_(stopping),
        draining_(draining),
        notice_due_(draining) {}

  void Begin() {
    if (caller_ != nullptr) {
      GRANARY_LOG(kDebug) << "peer=" << LogQuote(peer_) << Identity()
                          << " gateway: client stream accepted";
    }
    Advance();
  }

  // " identity=..." for log lines about this stream's client, or nothing.
  std::string Identity() const {
    return caller_ == nullptr ? std::string()
                              : " identity=" + LogQuote(*caller_);
  }

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // The gateway is going: tell the client, which half-closes the stream
  // once it has sent what it queued here.
  void Drain() {
    {
      MutexLock lock(&mu_);
      if (draining_) return;
      draining_ = true;
      notice_due_ = true;
    }
    // The client half-closes (no more credit): streams end, reopen elsewhere.
    served_.EndAll(absl::UnavailableError(
        "the gateway is shutting down: open the stream again"));
    Advance();
  }

  bool Going() { MutexLock l(&mu_); return draining_ || stopping_; }

  // The gateway is stopping: read nothing more, finish once drained.
  void Stop() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    served_.EndAll(absl::UnavailableError("the gateway is stopping"));
    Advance();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        MutexLock lock(&mu_);
        reading_ = false;
        reads_done_ = true;
      }
      Advance();
      return;
    }
    {
      MutexLock lock(&mu_);
      if (finished_) {
        // The stream already ended (a stopping gateway finishes while a
        // read is outstanding): these requests were never taken, and the
        // client sends them elsewhere.
        reading_ = false;
        incoming_.Clear();
        return;
      }
      dispatching_ = true;  // no finishing until they are counted
    }
    grpc::ProtoBufferReader reader(&incoming_);
    const bool parsed = batch_.ParseFromZeroCopyStream(&reader);
    incoming_.Clear();
    if (!parsed) {
      GRANARY_LOG_EVERY(kWarning, absl::Seconds(1))
          << "peer=" << LogQuote(peer_) << Identity()
          << " gateway: undecodable batch; ending its stream";
      {
        MutexLock lock(&mu_);
        reading_ = false;
        dispatching_ = false;
        Break(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "a message on the stream is not a "
                           "granary.v1.RequestBatch"));
      }
      Advance();
      return;
    }
    // When every worker sleeps, this thread runs the first grain the batch
    // wakes itself, after the next read has started: no worker wake-up.
    Scheduler::HelpScope help(&silo_->scheduler());
    Dispatch();
    {
      MutexLock lock(&mu_);
      reading_ = false;
      dispatching_ = false;
    }
    Advance();
    help.RunKept();
  }

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

  void OnDone() override {
    // gRPC orders this after the constructor, but inside its uninstrumented
    // core; taking mu_ (as Begin did) shows ThreadSanitizer that order.
    { MutexLock lock(&mu_); }
    service_->Forget(this);
    Unref();
  }

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
    auto* self = static_cast<GatewayStream*>(ctx);
    self->Finished(call);
    self->Unref();
  }

 private:
  ~GatewayStream() override {
    int64_t held;
    {
      MutexLock lock(&mu_);
      held = pending_bytes_ + writing_bytes_ + to_release_;
    }
    bytes_.Release(held);
  }

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

  void Finished(CallBase* call) {
    if (call->one_way()) {
      // No reply: only a change that matters to Advance takes the lock
      // (reading resumes below the limits; a draining stream finishes at 0).
      const int64_t before = bytes_.Release(call->charge());
      const int left = in_flight_.fetch_sub(1, std::memory_order_acq_rel) - 1;
      if (left == max_in_flight_ - 1 || left == 0 ||
          (max_connection_bytes_ > 0 && before >= max_connection_bytes_)) {
        Advance();
      }
      return;
    }
    open_.Remove(call->caller_tag(), call);
    v1::Reply reply = ReplyOfCall(*call, max_message_bytes_, from_silos_);
    if (call->stream() != nullptr) {
      // After the stream's last items; streams are not in flight (Accept).
      if (!served_.End(call->caller_tag(), call, &reply)) {
        MutexLock lock(&mu_);
        QueueLocked(std::move(reply));  // not served (cannot happen)
      }
    } else {
      MutexLock lock(&mu_);
      in_flight_.fetch_sub(1, std::memory_order_acq_rel);
      QueueLocked(std::move(reply));
    }
    bytes_.Release(call->charge());
    Advance();
  }

  // Routes every request of the batch just read. The batch was read because
  // fewer than max_in_flight calls were unfinished; all of it is accepted
  // (bad requests get their error reply), so the stream holds at most
  // max_in_flight calls plus one batch, and nothing is dropped.
  void Dispatch() {
    const int n = batch_.requests_size();
    in_flight_.fetch_add(n, std::memory_order_relaxed);  // refusals give back
    bool stopping;
    {
      MutexLock lock(&mu_);
      stopping = stopping_ || draining_;
    }
    std::vector<v1::Reply> refused;
    int accepted = 0;
    for (v1::Request& request : *batch_.mutable_requests()) {
      absl::Status error = Accept(request, stopping);
      if (error.ok()) {
        ++accepted;
        continue;
      }
      if (request.id() != 0) {
        refused.push_back(ErrorReply(request.id(), error));
      } else {
        // A client can send these at will: one line a second at most.
        GRANARY_LOG_EVERY(kWarning, absl::Seconds(1))
            << "peer=" << LogQuote(peer_) << Identity()
            << " gateway: one-way request refused: " << error;
      }
    }
    in_flight_.fetch_sub(n - accepted, std::memory_order_relaxed);
    {
      // Refusals go ahead of the items the credits below release.
      MutexLock lock(&mu_);
      for (v1::Reply& r : refused) QueueLocked(std::move(r));
    }
    if (!batch_.cancels().empty()) open_.Cancel(batch_.cancels());
    for (const v1::StreamCredit& c : batch_.credits()) {
      served_.Grant(c.id(), c.n());
    }
    batch_.Clear();
  }

  // The route of `method`; consecutive requests usually share it.
  const Route* FindRoute(const std::string& method) {
    if (last_route_ == nullptr || method != last_method_) {
      last_route_ = service_->FindRoute(method);
      last_method_ = method;
    }
    return last_route_;
  }

  // Starts one request, or says why not.
  absl::Status Accept(v1::Request& request, bool stopping) {
    Silo* silo = silo_;
    const int64_t bytes = CallBytes(request);  // before the key moves
    const Route* route = FindRoute(request.method());
    GRANARY_RETURN_IF_ERROR(
        CheckGatewayRoute(route, request, stopping, *silo));
    const bool streaming =
        route->method != nullptr && route->method->server_streaming;
    if (streaming) {
      GRANARY_RETURN_IF_ERROR(
          CheckStreamRequest(served_, request, max_in_flight_));
    }
    GRANARY_ASSIGN_OR_RETURN(
        CallBase * call,
        CallFromGatewayRequest(*route, request, from_silos_, caller_, silo));
    GRANARY_LOG_CALL_ACCEPTED(*call, request.method(),
                              from_silos_ ? "silo" : "client");
    Ref();  // the call's
    call->set_charge(static_cast<uint32_t>(bytes));
    bytes_.Charge(bytes);
    call->SetDoneCallback(&GatewayStream::CallDone, this);
    if (!call->one_way() && request.id() != 0) open_.Add(request.id(), call);
    if (streaming) {
      // Not in flight (that would stall its credit): bounded apart.
      in_flight_.fetch_sub(1, std::memory_order_relaxed);
      served_.Add(request.id(), call, request.stream_window());
      if (Going()) {  // Drain or Stop may have ended the others already
        call->Fail(absl::UnavailableError(
            "the gateway is shutting down: open the stream again"));
        call->Release();
        return absl::OkStatus();
      }
    }
    if (route->method == nullptr) {
      silo->InvokeReminder(call);
    } else {
      silo->Invoke(call);
    }
    return absl::OkStatus();
  }

  // Starts what is due (PlanLocked); then, without mu_, gives back what
  // Break dropped and waits for the silo's budget when it stopped reading.
  void Advance() {
    Steps steps;
    {
      MutexLock lock(&mu_);
      PlanLocked(&steps);
    }
    bytes_.Release(steps.release);
    if (steps.cancel_streams) {
      served_.EndAll(absl::CancelledError("the client went away"));
    }
    if (steps.wait_for_budget && !silo_budget_->WakeWhenUnder(this)) {
      // Under the limit again already: read after all.
      Wake();
    }
    if (steps.stop_waiting && silo_budget_->Cancel(this)) Unref();
    if (ItemRoom() > 0) served_.Unstall();
  }

  // What Advance does once mu_ is released.
  struct Steps {
    int64_t release = 0;           // bytes Break dropped
    bool wait_for_budget = false;  // register with the silo's budget
    bool stop_waiting = false;     // finished: leave the budget's waiters
    bool cancel_streams = false;   // broken: the client reads no more items
  };

  // Requires mu_: decides what is due and starts the gRPC operations.
  void PlanLocked(Steps* steps) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    steps->release = to_release_;
    to_release_ = 0;
    if (broken_ && !streams_cancelled_) {
      streams_cancelled_ = true;
      steps->cancel_streams = true;
    }
    if (finished_) return;
    bool read = false;
    bool write = false;
    bool finish = false;
    grpc::Status status;
    if (!write_in_flight_ && !broken_ && (!pending_.empty() || notice_due_)) {
      FillWriteLocked();
      write_in_flight_ = true;
      write = true;
    }
    const int in_flight = in_flight_.load(std::memory_order_acquire);
    if (!reading_ && !reads_done_ && !broken_ && !stopping_ &&
        in_flight < max_in_flight_) {
      // Over a budget, the stream is not read: HTTP/2 flow control then
      // holds the client back, and nothing it sent is dropped.
      if (ItemRoom() <= 0) {  // over the connection's budget
        if (!paused_) silo_->metrics().paused_connection->Inc();
        paused_ = true;
      } else if (silo_budget_ != nullptr && silo_budget_->Over()) {
        if (!paused_) silo_->metrics().paused_silo->Inc();
        paused_ = true;
        // Nothing of this stream's own may be left to wake it.
        if (!budget_wait_) {
          budget_wait_ = true;
          steps->wait_for_budget = true;
          Ref();  // the waiter's
        }
      } else {
        paused_ = false;
        reading_ = true;
        read = true;
      }
    }
    const bool drained = in_flight == 0 && served_.open() == 0 &&
                         pending_.empty() &&
                         !write_in_flight_ && !dispatching_;
    if (broken_ && !write_in_flight_) {
      finish = true;
      status = broken_status_;
    } else if (drained && stopping_) {
      finish = true;
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "silo is shutting down");
      // Tells the client this server is going away: its connection
      // should not be used for a new stream (see GatewayLink).
      context_->AddTrailingMetadata(kStoppingKey, "1");
    } else if (drained && reads_done_) {
      finish = true;
    }
    if (finish) {
      finished_ = true;
      read = false;
      steps->stop_waiting = budget_wait_;
      budget_wait_ = false;
    }
    // The operations start under mu_: a read decided here must be started
    // before any other thread can decide to finish (gRPC 1.51 runs no
    // reaction inline, so holding mu_ cannot deadlock).
    if (write) StartWrite(&outgoing_);
    if (read) StartRead(&incoming_);
    if (finish) Finish(status);
  }

  // Requires mu_: moves pending replies into the batch to write, up to about
  // max_batch_bytes (always at least one), and the drain notice when due.
  void FillWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (notice_due_) {
      writing_.set_draining(true);
      notice_due_ = false;
    }
    const size_t bytes = MoveToBatch(&pending_, max_batch_bytes_, &writing_);
    pending_bytes_ -= static_cast<int64_t>(bytes);
    writing_bytes_ += static_cast<int64_t>(bytes);
    bool own = false;
    // Serializes straight into gRPC slices; cannot fail for a valid message.
    (void)grpc::GenericSerialize<grpc::ProtoBufferWriter, v1::ReplyBatch>(
        writing_, &outgoing_, &own);
  }

  // The service is only used until OnDone (the server outlives its
  // streams' reactions); calls that finish later touch only the stream.
  GatewayService::Impl* const service_;
  Silo* const silo_;
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
  OpenCalls open_;  // awaited calls, for the client's cancels
  ServedStreams served_{this};  // server-streaming calls: items and credit

  // Touched only by the read side (one read at a time).
  grpc::ByteBuffer incoming_;
  v1::RequestBatch batch_;
  std::string last_method_;
  const Route* last_route_ = nullptr;
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
  ConnectionBytes bytes_{silo_budget_};  // never released under mu_
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

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
GatewayService::Impl::Connect(grpc::CallbackServerContext* context) {
  Silo* silo = this->silo();
  if (silo == nullptr) {
    return new RefusedStream(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "silo starting"));
  }
  GatewayStream* stream;
  {
    MutexLock lock(&mu_);
    if (options_.max_streams > 0 &&
        streams_.size() >= static_cast<size_t>(options_.max_streams)) {
      silo->metrics().streams_refused->Inc();
      return new RefusedStream(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the gateway has ", options_.max_streams,
                       " streams open (--max_gateway_streams): retry later "
                       "or on another gateway")));
    }
    stream = new GatewayStream(this, context, stopping_, draining_);
    streams_.insert(stream);
    silo->metrics().gateway_connections->Add(1);
  }
  stream->Begin();
  return stream;
}

void GatewayService::Impl::Drain() {
  SetAndTellStreams(&draining_, &GatewayStream::Drain);
}

void GatewayService::Impl::Stop() {
  SetAndTellStreams(&stopping_, &GatewayStream::Stop);
}

void GatewayService::Impl::SetAndTellStreams(bool* flag,
                                             void (GatewayStream::*tell)()) {
  std::vector<GatewayStream*> streams;
  {
    MutexLock lock(&mu_);
    *flag = true;  // streams that connect from now on start that way
    for (GatewayStream* s : streams_) {
      s->Ref();
      streams.push_back(s);
    }
  }
  for (GatewayStream* s : streams) {
    (s->*tell)();
    s->Unref();
  }
}

}  // namespace granary::silo
