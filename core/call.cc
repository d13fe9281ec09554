#include "core/call.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "core/grain_interface.h"
#include "core/log.h"
#include "core/stream.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace granary {
namespace internal {

TurnContext*& CurrentTurnSlot() {
  thread_local TurnContext* current = nullptr;
  return current;
}

absl::Status NoInvokerError(const GrainId& id) {
  return absl::FailedPreconditionError(absl::StrCat(
      "grain reference ", id.ToString(),
      " has no runtime: obtain it from a silo or client, or use it inside "
      "grain code"));
}

RequestContext ContextOfNewCall() {
  if (TurnContext* turn = CurrentTurn()) return turn->request;
  RequestContext context = RootContext();
  context.values = ThreadContext().values;
  return context;
}

namespace {

// Sends `call` (whose waiter, if any, is set) with the context, trace and
// cancel scope of the code calling; `options` may be null.
void SendCall(CallBase* call, CallInvoker* invoker,
              const CallOptions* options) {
  TurnContext* turn = CurrentTurn();
  RequestContext context = ContextOfNewCall();
  if (options != nullptr) {
    if (turn == nullptr && !options->traceparent.empty()) {
      context.trace = ContinueTrace(options->traceparent);
    }
    if (absl::Status s = MergeContext(options->context, &context); !s.ok()) {
      call->set_request_context(std::move(context));
      call->Fail(std::move(s));  // resumes the caller, who holds a reference
      return;
    }
  }
  // The call is cancelled with the token the caller gave, or else with the
  // request the calling turn serves (whose token the context carries on, so
  // the turn has it again when this call's answer resumes it).
  CancelState* parent = options != nullptr && options->cancel.state()
                            ? options->cancel.state()
                            : context.cancel.get();
  call->set_request_context(std::move(context));
  if (turn != nullptr && turn->grain != nullptr) {
    call->set_caller_grain(*turn->grain);
  }
  // The caller's awaiter may be gone once the call is registered: a cancel
  // on another thread can finish it (and resume the caller) at once.
  call->AddRef();  // the invoker's
  if (!call->Adopt(parent)) {
    call->Cancel();   // may resume the caller here, who lets its hold go
    call->Release();  // never sent
    return;
  }
  invoker->Invoke(call);
}

}  // namespace

void CallAwaiter::await_suspend(std::coroutine_handle<> h) {
  TurnContext* turn = CurrentTurn();
  call_->SetWaiter(h, turn != nullptr ? turn->activation : nullptr, invoker_);
  SendCall(call_, invoker_, options_);
}

void StartStreamCall(CallBase* call, CallInvoker* invoker,
                     const CallOptions& options) {
  SendCall(call, invoker, &options);
}

}  // namespace internal

namespace {

// Chain ids travel between silos, so they must not repeat across processes:
// a per-process counter goes through a bijective mix keyed by a random salt.
uint64_t ChainSalt() {
  static const uint64_t salt = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  return salt;
}

uint64_t MixChain(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t NewChainId() {
  const uint64_t id = MixChain(NextChainCounter() ^ ChainSalt());
  return id == 0 ? 1 : id;  // 0 means "no chain" on the wire
}

uint64_t NextChainCounter() {
  static std::atomic<uint64_t> next_block{1};
  constexpr uint64_t kBlock = 1024;
  thread_local uint64_t next = 0;
  thread_local uint64_t end = 0;
  if (next == end) {
    next = next_block.fetch_add(1, std::memory_order_relaxed) * kBlock;
    end = next + kBlock;
  }
  return next++;
}

CallInvoker* GrainRef::invoker() const {
  if (invoker_ != nullptr) return invoker_;
  TurnContext* turn = CurrentTurn();
  return turn != nullptr ? turn->invoker : nullptr;
}

CallBase::~CallBase() {
  if (stream_ != nullptr) stream_->Release();
}

void CallBase::Fail(absl::Status status) {
  if (TryClaim()) Deliver(std::move(status));
}

void CallBase::ArmDeadline(TimerQueue* timers) {
  if (one_way_ || deadline_ == absl::InfiniteFuture()) return;
  AddRef();  // the timer's
  deadline_timers_.store(timers, std::memory_order_seq_cst);
  timers->Schedule(this, deadline_);
  // A cancel that ran meanwhile may have missed the timer (OnCancelled):
  // the deadline would hold the finished call until it passed.
  if (cancelled() && timers->Cancel(this)) Release();
}

void CallBase::OnTimer() {
  if (TryClaim()) {
    status_ = absl::DeadlineExceededError(absl::StrCat(
        "deadline of ", absl::FormatDuration(timeout_), " passed calling ",
        target_.ToString(), " method #", method_,
        "; whether the grain ran the request is unknown"));
    HandBack(/*callee_may_hold=*/true);
  }
  // The caller no longer waits: the grain's token fires and the calls made
  // on this call's behalf are cancelled (core/cancel.h).
  if (!one_way_) Cancel();
  Release();  // the timer's
}

void CallBase::OnCancelled() {
  if (!TryClaim()) return;  // answered, or its deadline passed, already
  status_ = absl::CancelledError(absl::StrCat(
      "call to ", target_.ToString(), " method #", method_,
      " was cancelled; whether the grain ran the request is unknown"));
  // Whoever cancels holds a reference, so this never frees the call.
  TimerQueue* timers = deadline_timers_.load(std::memory_order_seq_cst);
  if (timers != nullptr && timers->Cancel(this)) Release();
  HandBack(/*callee_may_hold=*/true);
}

void CallBase::Deliver(absl::Status status) {
  status_ = std::move(status);
  // The caller of Deliver holds a reference, so this never frees the call.
  TimerQueue* timers = deadline_timers_.load(std::memory_order_acquire);
  if (timers != nullptr && timers->Cancel(this)) Release();
  HandBack(/*callee_may_hold=*/false);
}

void CallBase::HandBack(bool callee_may_hold) {
  // The stream's consumer reads what was queued, then this status.
  if (stream_ != nullptr) stream_->Close(status_);
  if (one_way_) {
    if (!status_.ok()) {
      GRANARY_LOG(kWarning) << "one-way call to " << target_.ToString()
                            << " method #" << method_ << " failed: " << status_;
    }
    if (done_fn_ != nullptr) done_fn_(done_ctx_, this);
    return;
  }
  if (done_fn_ != nullptr) {
    done_fn_(done_ctx_, this);
    return;
  }
  if (!waiter_) return;
  if (sink_ == nullptr) {
    ResumeWaiter();
  } else if (callee_may_hold) {
    AddRef();  // the notice's
    sink_->Post(new DeadlineNotice(this));
  } else {
    kind = MessageKind::kResponse;
    sink_->Post(this);
  }
}

void DropAnswer(Message* m) {
  if (m->kind == MessageKind::kDeadline) {
    auto* notice = static_cast<DeadlineNotice*>(m);
    notice->call->Release();
    delete notice;
  } else if (m->kind == MessageKind::kResume) {
    delete static_cast<ResumeMessage*>(m);
  }
  // A kResponse call is owned by the coroutine awaiting it.
}

void CallBase::ResumeWaiter() {
  ScopedTurn outside(nullptr);  // the caller runs outside any activation
  waiter_.resume();
}

absl::StatusOr<CallBase*> NewCallFromWire(
    const InterfaceInfo& iface, const MethodInfo& method, std::string key,
    google::protobuf::io::ZeroCopyInputStream* payload,
    absl::Duration timeout) {
  CallBase* call = method.new_call(GrainId(iface.type_name, std::move(key)));
  if (payload == nullptr || !call->request().ParseFromZeroCopyStream(payload)) {
    absl::Status error = absl::InvalidArgumentError(
        absl::StrCat("payload is not a valid ", call->request().GetTypeName(),
                     " for ", method.full_name));
    call->Release();
    return error;
  }
  call->set_timeout(timeout);
  call->set_request_context(RootContext());
  return call;
}

}  // namespace granary
