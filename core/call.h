// File: core/call.h
// -----------------------------------------------------------------------------
// Calls between grains, and from outside into grains.
//
// A call is one heap object (`Call<Req, Resp>`) that carries the request to
// the target activation, is filled with the reply there, and travels back to
// the caller: the same object, so an awaited call costs one allocation for
// the message and none for the reply. Local calls move protobuf objects and
// never serialize them.
//
// Generated references (`CounterRef`) call `internal::Ask` / `internal::Tell`;
// a `CallInvoker` (the silo runtime, or the client SDK) routes the call.
//
//   CounterRef counter = silo.Get<CounterRef>("alice");
//   AddRequest req; req.set_amount(5);
//   absl::StatusOr<CounterValue> v = counter.Add(req).Get();  // plain thread
//   CounterValue w = co_await counter.Add(req);               // coroutine
//
// Completion: exactly one of the callee's reply, the deadline and a cancel
// (core/cancel.h) wins (`TryClaim`); only the winner writes the result, and
// it hands the call back to the caller: posted to the caller activation's
// mailbox (the reply resumes grain code as a message of its own activation,
// never inline on another activation's thread), resumed inline for callers
// outside any activation, or passed to a callback for generic (serialized)
// callers.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/cancel.h"
#include "core/grain_id.h"
#include "core/mpsc_queue.h"
#include "core/request_context.h"
#include "core/status.h"
#include "core/task.h"
#include "core/timer_queue.h"
#include "google/protobuf/empty.pb.h"
#include "google/protobuf/message.h"

namespace granary {

// The method index of a reminder tick (silo/runtime/reminder_service.h): never
// a method of the grain's interface, so no client can send one.
inline constexpr uint32_t kReminderMethod = 0xFFFFFFFEu;

// The gateway-protocol method of a reminder tick for grain type `type`,
// sent from silo to silo in a cluster ("$" is in no gRPC method name, so no
// grain method can take it). Silos accept it only from other silos.
inline std::string ReminderMethodPath(absl::string_view type) {
  std::string path;
  path.reserve(type.size() + 11);
  path.append("/").append(type.data(), type.size()).append("/$Reminder");
  return path;
}

// The method index of an opaque call (core/opaque_call.h): one a silo
// passes on without knowing its type or method.
inline constexpr uint32_t kOpaqueMethod = 0xFFFFFFFDu;

class CallBase;
class CallInvoker;
class StreamChannel;

// Default deadline of a request (DESIGN.md: 30 s).
inline constexpr absl::Duration kDefaultCallTimeout = absl::Seconds(30);

struct CallOptions {
  CallOptions() = default;
  // CallOptions{absl::Seconds(5)}: a timeout and nothing else.
  CallOptions(absl::Duration t) : timeout(t) {}  // NOLINT: implicit on purpose

  // How long the caller waits for the reply. Expiry gives the caller
  // DEADLINE_EXCEEDED; whether the callee ran the request is then unknown.
  absl::Duration timeout = kDefaultCallTimeout;
  // Request context entries set on this call, over those of the current
  // turn (or, outside grain code, of the thread): core/request_context.h.
  // Invalid entries fail the call with INVALID_ARGUMENT.
  ContextMap context;
  // A W3C traceparent the call continues (outside grain code; a turn's calls
  // continue its trace). Empty or unparsable: a new trace.
  std::string traceparent;
  // Cancels the call (core/cancel.h): the caller gets CANCELLED at once, a
  // queued request never runs and a running one sees its token fire. Unset:
  // in grain code the running turn's token (the call is cancelled with the
  // request it serves), elsewhere nothing. Awaited calls only.
  CancellationToken cancel;
};

// What a mailbox holds.
enum class MessageKind : uint8_t {
  kRequest,   // a call to run (awaited or one-way)
  kResponse,  // a finished call coming back to the activation that awaits it
  kDeadline,  // a DeadlineNotice: a call whose deadline passed
  kTimer,     // a grain timer tick
  kControl,   // runtime control (idle collection)
  kResume,    // a ResumeMessage: a suspended coroutine of the activation
              // continues (e.g. its storage I/O finished)
};

struct Message : MpscNode {
  explicit Message(MessageKind k) : kind(k) {}
  virtual ~Message() = default;
  MessageKind kind;
};

// Something that accepts messages for later processing on its own thread of
// control: an activation. Replies to calls made by grain code are posted here.
class MessageSink {
 public:
  virtual void Post(Message* m) = 0;

 protected:
  ~MessageSink() = default;
};

// Thread-local state of the turn that runs on this thread, if any.
struct TurnContext {
  CallInvoker* invoker = nullptr;     // where refs without an invoker send
  MessageSink* activation = nullptr;  // where replies come back
  const GrainId* grain = nullptr;     // the activation's grain
  RequestContext request;
};

namespace internal {
TurnContext*& CurrentTurnSlot();
}  // namespace internal

// The turn running on this thread, or nullptr outside grain code.
inline TurnContext* CurrentTurn() { return internal::CurrentTurnSlot(); }

// The identity of the client whose call the running turn serves (through
// any chain of grain calls), as the gateway accepted it: the bearer token's
// name or the client certificate's subject. Empty outside grain code, for
// anonymous clients, and in timer and reminder turns.
inline std::string_view CallerIdentity() {
  TurnContext* turn = CurrentTurn();
  if (turn == nullptr || turn->request.caller == nullptr) return {};
  return *turn->request.caller;
}

// Installs `ctx` as the current turn for its lifetime, restoring the previous
// one after.
class ScopedTurn {
 public:
  explicit ScopedTurn(TurnContext* ctx)
      : saved_(std::exchange(internal::CurrentTurnSlot(), ctx)) {}
  ~ScopedTurn() { internal::CurrentTurnSlot() = saved_; }
  ScopedTurn(const ScopedTurn&) = delete;
  ScopedTurn& operator=(const ScopedTurn&) = delete;

 private:
  TurnContext* saved_;
};

// A fresh chain id for a call that starts a chain (from outside, a timer).
uint64_t NewChainId();
// The process-local counter NewChainId mixes.
uint64_t NextChainCounter();

// Routes calls to their target activations.
class CallInvoker {
 public:
  virtual ~CallInvoker() = default;
  // Takes one reference on `call` (released when the call is done with).
  // Must eventually finish the call unless it is one-way.
  virtual void Invoke(CallBase* call) = 0;
};

// Generic completion for callers that are neither coroutines nor activations
// (the gateway, tests): runs on the thread that finishes the call.
using CallDoneFn = void (*)(void* ctx, CallBase* call);

class CallBase : public Message, public TimerEntry, public CancelState {
 public:
  CallBase(GrainId target, uint32_t method, bool one_way)
      : Message(MessageKind::kRequest),
        target_(std::move(target)),
        method_(method),
        one_way_(one_way) {}

  const GrainId& target() const { return target_; }
  uint32_t method() const { return method_; }
  bool one_way() const { return one_way_; }

  const RequestContext& request_context() const { return context_; }
  // Before the call is sent (the outgoing call filters change it in place).
  RequestContext& mutable_request_context() { return context_; }
  void set_request_context(const RequestContext& c) { context_ = c; }
  void set_request_context(RequestContext&& c) { context_ = std::move(c); }
  absl::Duration timeout() const { return timeout_; }
  void set_timeout(absl::Duration t) { timeout_ = t; }
  absl::Time deadline() const { return deadline_; }
  void set_deadline(absl::Time d) { deadline_ = d; }
  // Whether ArmDeadline ran: a call forwarded to another silo already has
  // its deadline running where it was admitted.
  bool deadline_armed() const {
    return deadline_timers_.load(std::memory_order_acquire) != nullptr;
  }
  // How many times silos forwarded this call (see gateway.proto, hops).
  uint32_t hops() const { return hops_; }
  void set_hops(uint32_t h) { hops_ = h; }
  // The least version of the grain's interface a new activation for this
  // call must be hosted in (gateway.proto, Request.min_version); 0 or 1:
  // any.
  uint32_t min_version() const { return min_version_; }
  void set_min_version(uint32_t v) { min_version_ = v; }
  // The grain whose code made this call (a turn of its activation); null
  // for calls from clients, hosting processes and the runtime. For call
  // filters (silo/runtime/call_filter.h).
  const GrainId* caller_grain() const {
    return caller_grain_.key().empty() ? nullptr : &caller_grain_;
  }
  void set_caller_grain(const GrainId& g) { caller_grain_ = g; }
  // Bytes a gateway charged to its memory budget for this call
  // (core/memory_budget.h), given back when the call finishes.
  uint32_t charge() const { return charge_; }
  void set_charge(uint32_t bytes) { charge_ = bytes; }

  virtual google::protobuf::Message& request() = 0;
  virtual google::protobuf::Message& reply() = 0;

  // The outcome once finished: OK means reply() holds the answer.
  const absl::Status& status() const { return status_; }

  // --- caller side -------------------------------------------------------
  // Where the finished call goes: resume `waiter`, either by posting this
  // call to `sink` (an activation) or inline when `sink` is null.
  void SetWaiter(std::coroutine_handle<> waiter, MessageSink* sink,
                 CallInvoker* invoker) {
    waiter_ = waiter;
    sink_ = sink;
    invoker_ = invoker;
  }
  // Generic completion: `fn(ctx, call)` runs once the call is finished.
  // For a one-way call it runs when the callee has finished with it (so a
  // gateway can bound what a client has outstanding).
  void SetDoneCallback(CallDoneFn fn, void* ctx) {
    done_fn_ = fn;
    done_ctx_ = ctx;
  }
  // A value of the generic caller's choosing (a gateway's correlation id).
  uint64_t caller_tag() const { return caller_tag_; }
  void set_caller_tag(uint64_t tag) { caller_tag_ = tag; }
  // The gateway of the silo this call was passed on to (a cluster's
  // router sets it; interned: InternStringPtr), for the caller's location
  // cache (gateway.proto, Reply.host_gateway). Empty: not passed on. Atomic:
  // the router sets it on a network thread while the call's deadline may
  // fire and read it on the timer thread.
  absl::string_view host_gateway() const {
    const std::string* g = host_gateway_.load(std::memory_order_acquire);
    return g != nullptr ? absl::string_view(*g) : absl::string_view();
  }
  void set_host_gateway(const std::string* g) {
    host_gateway_.store(g, std::memory_order_release);
  }
  std::coroutine_handle<> waiter() const { return waiter_; }

  // --- callee side -------------------------------------------------------
  // Wins the right to finish the call (against the deadline). Only the
  // winner may write the status or reply and then call Deliver().
  bool TryClaim() {
    return !claimed_.exchange(true, std::memory_order_acq_rel);
  }
  // Claims and finishes with `status`; a no-op when already claimed.
  void Fail(absl::Status status);
  // After a successful TryClaim: records `status` and hands the call back to
  // its caller. For OK, reply() must hold the answer.
  void Deliver(absl::Status status);

  // Resumes an awaiting coroutine that runs outside any activation, on this
  // thread. (Activations resume theirs when they process the answer.)
  void ResumeWaiter();

  // The invoker arms the deadline through a timer queue; see Invoke paths.
  void ArmDeadline(TimerQueue* timers);

  // Scratch space of the runtime serving the call: the activation running it
  // and the coroutine frame of the grain method.
  void* callee() const { return callee_; }
  void set_callee(void* c) { callee_ = c; }
  void* callee_frame() const { return callee_frame_; }
  void set_callee_frame(void* f) { callee_frame_ = f; }

  // The items of a server-streaming call (core/stream.h), or null. The call
  // holds a reference; whatever finishes the call closes it with the call's
  // status.
  StreamChannel* stream() const { return stream_; }
  // Once, before the call is sent; takes the reference `s` comes with.
  void set_stream(StreamChannel* s) { stream_ = s; }

  // --- lifetime ------------------------------------------------------------
  // AddRef and Release (CancelState's count): the last reference deletes.

 protected:
  ~CallBase() override;

 private:
  void OnTimer() override;  // the deadline passed
  // Cancelled (CancelState::Cancel): finishes the call with CANCELLED.
  void OnCancelled() override;
  // Hands the finished call to its caller. `callee_may_hold` is true on the
  // deadline path, where the callee may still have the call queued.
  void HandBack(bool callee_may_hold);

  GrainId target_;
  uint32_t method_;
  bool one_way_;
  std::atomic<bool> claimed_{false};
  RequestContext context_;
  GrainId caller_grain_;  // empty key: none
  absl::Duration timeout_ = kDefaultCallTimeout;
  absl::Time deadline_ = absl::InfiniteFuture();
  absl::Status status_;
  // Set once by ArmDeadline; read by a cancel on another thread.
  std::atomic<TimerQueue*> deadline_timers_{nullptr};
  std::coroutine_handle<> waiter_;
  MessageSink* sink_ = nullptr;
  CallInvoker* invoker_ = nullptr;
  CallDoneFn done_fn_ = nullptr;
  void* done_ctx_ = nullptr;
  uint64_t caller_tag_ = 0;
  std::atomic<const std::string*> host_gateway_{nullptr};
  uint32_t hops_ = 0;
  uint32_t charge_ = 0;
  uint32_t min_version_ = 0;
  void* callee_ = nullptr;
  void* callee_frame_ = nullptr;
  StreamChannel* stream_ = nullptr;
};

// Tells the awaiting activation that `call`'s deadline passed. A separate
// message, because the callee may still hold the call itself in its mailbox
// (a message is in one queue at a time). Holds a reference on the call.
struct DeadlineNotice final : Message {
  explicit DeadlineNotice(CallBase* c)
      : Message(MessageKind::kDeadline), call(c) {}
  CallBase* call;
};

// Continues `handle` as a turn of the activation it is posted to, with the
// request context it was suspended in. Whoever completes the awaited work
// (e.g. a storage thread) posts it; the activation owns it once posted and
// deletes it after the resumed coroutine suspends again, so a subclass may
// carry the awaited result for await_resume to take.
struct ResumeMessage : Message {
  ResumeMessage() : Message(MessageKind::kResume) {}
  std::coroutine_handle<> handle;
  RequestContext request;
};

// Disposes of a kResponse, kDeadline or kResume message that will not be
// processed.
void DropAnswer(Message* m);

// Releases a call reference at scope exit.
class CallRef {
 public:
  explicit CallRef(CallBase* c) : call_(c) {}
  ~CallRef() {
    if (call_ != nullptr) call_->Release();
  }
  CallRef(const CallRef&) = delete;
  CallRef& operator=(const CallRef&) = delete;
  CallBase* get() const { return call_; }

 private:
  CallBase* call_;
};

template <typename Req, typename Resp>
class Call final : public CallBase {
 public:
  Call(GrainId target, uint32_t method, bool one_way, Req&& request)
      : CallBase(std::move(target), method, one_way),
        request_(std::move(request)) {}
  Call(GrainId target, uint32_t method, bool one_way)
      : CallBase(std::move(target), method, one_way) {}

  google::protobuf::Message& request() override { return request_; }
  google::protobuf::Message& reply() override { return reply_; }
  Req& typed_request() { return request_; }
  Resp& typed_reply() { return reply_; }

 private:
  Req request_;
  Resp reply_;
};

// The handle of a grain reference: which grain, and which runtime carries
// calls to it. Generated references derive from it. Cheap to copy; calling
// never needs the grain to exist.
class GrainRef {
 public:
  GrainRef() = default;
  GrainRef(CallInvoker* invoker, GrainId id)
      : invoker_(invoker), id_(std::move(id)) {}

  const GrainId& id() const { return id_; }
  // The runtime calls go to: the one given at construction, else the runtime
  // of the turn running on this thread; nullptr when neither exists.
  CallInvoker* invoker() const;

  friend bool operator==(const GrainRef& a, const GrainRef& b) {
    return a.id_ == b.id_;
  }

 private:
  CallInvoker* invoker_ = nullptr;
  GrainId id_;
};

namespace internal {

// Suspends the calling coroutine and sends `call`; the caller is resumed when
// the call finishes.
class CallAwaiter {
 public:
  CallAwaiter(CallBase* call, CallInvoker* invoker,
              const CallOptions* options = nullptr)
      : call_(call), invoker_(invoker), options_(options) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h);
  void await_resume() const noexcept {}

 private:
  CallBase* call_;
  CallInvoker* invoker_;
  const CallOptions* options_;
};

absl::Status NoInvokerError(const GrainId& id);

// The context a call started now carries: the running turn's, or outside
// grain code a new chain and trace with the thread's context entries.
RequestContext ContextOfNewCall();

template <typename Req, typename Resp>
Task<Resp> Ask(CallInvoker* invoker, GrainId id, uint32_t method, Req request,
               CallOptions options) {
  if (invoker == nullptr) throw StatusError(NoInvokerError(id));
  auto* call = new Call<Req, Resp>(std::move(id), method, /*one_way=*/false,
                                   std::move(request));
  call->set_timeout(options.timeout);
  CallRef hold(call);
  co_await CallAwaiter(call, invoker, &options);
  if (!call->status().ok()) throw StatusError(call->status());
  co_return std::move(call->typed_reply());
}

// Sends a one-way call. Nothing comes back; failures are logged by the
// runtime that routes it.
template <typename Req>
void Tell(CallInvoker* invoker, GrainId id, uint32_t method, Req&& request) {
  auto* call = new Call<Req, google::protobuf::Empty>(
      std::move(id), method, /*one_way=*/true, std::move(request));
  RequestContext context = ContextOfNewCall();
  context.cancel = CancelRef();  // one-way calls are not cancelled
  call->set_request_context(std::move(context));
  if (TurnContext* turn = CurrentTurn(); turn != nullptr && turn->grain) {
    call->set_caller_grain(*turn->grain);
  }
  if (invoker == nullptr) {
    call->Fail(NoInvokerError(call->target()));
    call->Release();
    return;
  }
  invoker->Invoke(call);  // takes our reference
}

}  // namespace internal
}  // namespace granary
