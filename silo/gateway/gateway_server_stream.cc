#include "silo/gateway/gateway_server_stream.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "core/call.h"
#include "core/log.h"
#include "core/status.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

void GatewayServerStream::Begin() {
  if (caller_ != nullptr) {
    GRANARY_LOG(kDebug) << "peer=" << LogQuote(peer_) << Identity()
                        << " gateway: client stream accepted";
  }
  Advance();
}

std::string GatewayServerStream::Identity() const {
  return caller_ == nullptr ? std::string() : " identity=" + LogQuote(*caller_);
}

void GatewayServerStream::Drain() {
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

void GatewayServerStream::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  served_.EndAll(absl::UnavailableError("the gateway is stopping"));
  Advance();
}

void GatewayServerStream::OnReadDone(bool ok) {
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
  Scheduler::HelpScope help(&silo_->internals().scheduler());
  Dispatch();
  {
    MutexLock lock(&mu_);
    reading_ = false;
    dispatching_ = false;
  }
  Advance();
  help.RunKept();
}

void GatewayServerStream::OnDone() {
  // gRPC orders this after the constructor, but inside its uninstrumented
  // core; taking mu_ (as Begin did) shows ThreadSanitizer that order.
  { MutexLock lock(&mu_); }
  service_->Forget(this);
  Unref();
}

GatewayServerStream::~GatewayServerStream() {
  int64_t held;
  {
    MutexLock lock(&mu_);
    held = pending_bytes_ + writing_bytes_ + to_release_;
  }
  bytes_.Release(held);
}

void GatewayServerStream::Finished(CallBase* call) {
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

void GatewayServerStream::Dispatch() {
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
    for (v1::Reply& r : early_) QueueLocked(std::move(r));
  }
  early_.clear();
  if (!batch_.cancels().empty()) open_.Cancel(batch_.cancels());
  for (const v1::StreamCredit& c : batch_.credits()) {
    served_.Grant(c.id(), c.n());
  }
  batch_.Clear();
}

absl::Status GatewayServerStream::Accept(v1::Request& request, bool stopping) {
  Runtime* silo = silo_;
  int64_t bytes = CallBytes(request);  // before the key moves
  const int64_t payload_bytes = static_cast<int64_t>(request.payload().size());
  const Route* route = FindRoute(request.method());
  Route opaque;
  if (route == nullptr && silo != nullptr) {
    GRANARY_ASSIGN_OR_RETURN(opaque, OpaqueRoute(request, *silo));
    route = &opaque;
  }
  GRANARY_RETURN_IF_ERROR(CheckGatewayRoute(route, request, stopping, *silo));
  GRANARY_RETURN_IF_ERROR(CheckMinVersion(*route, request, *silo));
  // Passed on by a silo that could not read it: a one-way call is answered
  // once accepted (that silo waits for an answer), a streaming one refused.
  bool answer_now = false;
  if (from_silos_ && request.opaque() && route->method != nullptr) {
    if (route->method->server_streaming) {
      return absl::UnimplementedError(
          absl::StrCat(request.method(),
                       " is server-streaming: call it through a silo "
                       "of the release that has it"));
    }
    answer_now = route->method->one_way && request.id() != 0;
  }
  const bool streaming =
      route->method != nullptr && route->method->server_streaming;
  if (streaming) {
    GRANARY_RETURN_IF_ERROR(
        CheckStreamRequest(served_, request, max_in_flight_));
  }
  int64_t parsed = payload_bytes;
  GRANARY_ASSIGN_OR_RETURN(
      CallBase * call,
      CallFromGatewayRequest(*route, request, from_silos_, caller_, silo,
                             MaxParsedBytes(max_message_bytes_), &parsed));
  // Charged what the request holds parsed, not its wire bytes.
  bytes += std::max<int64_t>(0, parsed - payload_bytes);
  GRANARY_LOG_CALL_ACCEPTED(*call, request.method(),
                            from_silos_ ? "silo" : "client");
  Ref();  // the call's
  call->set_charge(static_cast<uint32_t>(bytes));
  bytes_.Charge(bytes);
  call->SetDoneCallback(&GatewayServerStream::CallDone, this);
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
  if (route->method == nullptr && route->opaque_type.empty()) {
    silo->internals().InvokeReminder(call);
  } else {
    silo->Invoke(call);
  }
  if (answer_now) early_.push_back(ErrorReply(request.id(), absl::OkStatus()));
  return absl::OkStatus();
}

void GatewayServerStream::Advance() {
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

void GatewayServerStream::PlanLocked(Steps* steps) {
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
      if (!paused_) silo_->internals().metrics().paused_connection->Inc();
      paused_ = true;
    } else if (silo_budget_ != nullptr && silo_budget_->Over()) {
      if (!paused_) silo_->internals().metrics().paused_silo->Inc();
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
                       pending_.empty() && !write_in_flight_ && !dispatching_;
  if (broken_ && !write_in_flight_) {
    finish = true;
    status = broken_status_;
  } else if (drained && stopping_) {
    finish = true;
    status =
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "silo is shutting down");
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

void GatewayServerStream::FillWriteLocked() {
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

}  // namespace granary::silo
