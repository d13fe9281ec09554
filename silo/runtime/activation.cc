#include "silo/runtime/activation.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "silo/runtime/grain_timer.h"
#include "silo/runtime/reentrancy.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

namespace {

// The activation whose Run this thread is in (the sender of the calls its
// turns make).
thread_local Activation* running_here = nullptr;

class RunningHere {
 public:
  explicit RunningHere(Activation* a)
      : saved_(std::exchange(running_here, a)) {}
  ~RunningHere() { running_here = saved_; }

 private:
  Activation* const saved_;
};

}  // namespace

Activation::Activation(Runtime* silo, const GrainTypeEntry* type, GrainId id,
                       uint64_t activation_id)
    : silo_(silo),
      type_(type),
      id_(std::move(id)),
      activation_id_(activation_id),
      stateless_(type->info->interface->stateless_worker),
      last_active_ns_(silo->internals().IdleClockNs()) {
  type_->metrics->created->Inc();
  type_->metrics->activations->Add(1);
}

// Every idle activation pays for these bytes; 320 is one of jemalloc's size
// classes (the next is 384). What only some activations use is made on
// first use (Extras, Held, ParkState, RoomState), and what a Run needs
// lives on its stack (RunState). Sanitizer builds lay some members out
// larger.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GRANARY_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GRANARY_SANITIZED_BUILD 1
#endif
#endif
#ifndef GRANARY_SANITIZED_BUILD
static_assert(sizeof(Activation) <= 320,
              "Activation grew past 320 bytes: move what only some "
              "activations use into Activation::Extras");
#endif

// Senders still waiting for room here go on.
Activation::~Activation() {
  WakeRoomWaiters();
  if (extras_ != nullptr) {
    for (CallBase* call : extras_->streams) call->Release();
  }
  delete park_.load(std::memory_order_relaxed);
  delete room_.load(std::memory_order_relaxed);
}

void Activation::Post(Message* m) {
  // Once pushed, the message may be run by a worker that then finishes the
  // activation: hold it alive until this poster is done with it.
  refs_.fetch_add(1, std::memory_order_relaxed);
  mailbox_.Push(m);
  pending_.fetch_add(1, std::memory_order_seq_cst);
  // Seeing `scheduled_` set means the runner has not yet cleared it, so its
  // re-check of `pending_` (after clearing) will see this message: no need
  // for the exchange, which would bounce the cache line on every post.
  if (!scheduled_.load(std::memory_order_seq_cst) &&
      !scheduled_.exchange(true, std::memory_order_seq_cst)) {
    silo_->internals().scheduler().Schedule(this);
  }
  Unref();
}

bool Activation::Offer(CallBase* call) {
  const int limit = silo_->options().max_mailbox;
  if (limit > 0 && queued_calls_.load(std::memory_order_relaxed) >= limit &&
      call->method() != kReminderMethod) {
    if (!call->one_way()) {
      silo_->internals().metrics().mailbox_full_requests->Inc();
      return false;
    }
    silo_->internals().metrics().mailbox_full_one_way->Inc();
    // Sent by a grain of this silo: its next turn waits for room here.
    Activation* sender = running_here;
    if (sender != nullptr && sender != this &&
        sender->pushed_back_by_ == nullptr) {
      refs_.fetch_add(1, std::memory_order_relaxed);  // the sender's hold
      sender->pushed_back_by_ = this;
    }
  }
  queued_calls_.fetch_add(1, std::memory_order_relaxed);
  Post(call);
  return true;
}

void RefuseMailboxFull(CallBase* call) {
  call->Fail(absl::ResourceExhaustedError(
      absl::StrCat("the mailbox of ", call->target().ToString(),
                   " is full (--max_mailbox calls queued): retry later")));
  call->Release();
}

void Activation::DrainMailbox() {
  while (Message* m = mailbox_.Pop()) {
    ++popped_;
    if (m->kind == MessageKind::kResponse ||
        m->kind == MessageKind::kDeadline || m->kind == MessageKind::kResume) {
      held().responses.push_back(m);
    } else {
      held().waiting.push_back(m);
    }
  }
}

void Activation::HoldBack(Message* m) {
  if (m->kind == MessageKind::kResponse || m->kind == MessageKind::kDeadline ||
      m->kind == MessageKind::kResume) {
    held().responses.push_front(m);
  } else {
    held().waiting.push_front(m);
  }
}

Message* Activation::NextMessage() {
  if (NothingHeld()) {
    // Fast path: nothing is held back, so the mailbox's oldest message is
    // next in order; run it straight from the mailbox when it may run now.
    Message* m = mailbox_.Pop();
    if (m == nullptr) return nullptr;
    ++popped_;
    if (m->kind == MessageKind::kResponse ||
        m->kind == MessageKind::kDeadline || m->kind == MessageKind::kResume ||
        Eligible(m)) {
      return m;
    }
    held().waiting.push_back(m);
  }
  DrainMailbox();
  if (held_ == nullptr) return nullptr;
  MessageFifo& responses = held_->responses;
  MessageFifo& waiting = held_->waiting;
  if (!responses.empty()) return responses.pop_front();
  // Without anything running every message is eligible, so a scan only
  // continues past the first entry while requests are suspended.
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (Eligible(waiting.at(i))) return waiting.take(i);
  }
  return nullptr;
}

bool Activation::HasReadyWork() const {
  if (held_ != nullptr && !held_->responses.empty()) return true;
  if (state_ == State::kActive && deactivate_requested_ && running_.empty()) {
    return true;
  }
  if (held_ == nullptr) return false;
  for (size_t i = 0; i < held_->waiting.size(); ++i) {
    if (Eligible(held_->waiting.at(i))) return true;
  }
  return false;
}

namespace {

// What `m` is, for the metrics; `method` gets a request's method.
inline MessageLabel LabelOf(const Message* m, uint32_t* method) {
  switch (m->kind) {
    case MessageKind::kRequest: {
      auto* call = static_cast<const CallBase*>(m);
      *method = call->method();
      return *method == kReminderMethod ? MessageLabel::kReminder
             : call->one_way()          ? MessageLabel::kOneWay
                                        : MessageLabel::kRequest;
    }
    case MessageKind::kResponse:
    case MessageKind::kDeadline:
      return MessageLabel::kResponse;
    case MessageKind::kTimer:
      return MessageLabel::kTimer;
    case MessageKind::kResume:
      return MessageLabel::kResume;
    case MessageKind::kControl:
      break;
  }
  return MessageLabel::kControl;
}

}  // namespace

void Activation::Run() {
  RunState run;
  run.turn.invoker = silo_;
  run.turn.activation = this;
  run.turn.grain = &id_;
  // Cleared before anything that lets another thread run this activation
  // (or frees it): every exit below.
  run_ = &run;
  ScopedTurn scoped(&run.turn);
  RunningHere running(this);
  SiloMetrics& metrics = silo_->internals().metrics();
  // Posted and not yet taken, plus what was taken but is held back.
  metrics.mailbox_depth->ObserveUnits(static_cast<uint64_t>(
      std::max<int64_t>(0, pending_.load(std::memory_order_relaxed) - popped_) +
      static_cast<int64_t>(held_ == nullptr ? 0
                                            : held_->waiting.size() +
                                                  held_->responses.size())));
  run.turn_start_ns = MonoNanos();
  // A network thread running this (Scheduler::HelpScope) must not block,
  // and runs few turns.
  const bool helper = Scheduler::Helping();
  if (run.turn_start_ns > silo_->internals().lease_until_ns()) [[unlikely]] {
    // The cluster has not confirmed this silo lately and may have moved
    // its grains: no grain code runs until it does. Fenced for good, this
    // activation is left as it is (the silo is done).
    // It waits off the workers: parked until the lease is renewed.
    run_ = nullptr;
    if (helper) {  // a worker parks it instead
      silo_->internals().scheduler().Schedule(this);
      return;
    }
    if (!silo_->internals().ParkUntilLease(this))
      return;     // parked, or never again
    run_ = &run;  // renewed meanwhile
    run.turn_start_ns = MonoNanos();
  }
  if (state_ == State::kCreating) BeginActivation();
  int budget = helper ? std::min(silo_->options().turn_budget,
                                 Scheduler::kHelperTurnBudget)
                      : silo_->options().turn_budget;
  const bool real_clock = silo_->clock()->IsReal();  // read once per run
  // Metrics of this Run's turns, added to the shared ones once at its end.
  std::array<uint32_t, static_cast<int>(MessageLabel::kCount)> received{};
  metrics::HistogramBatch turn_times;
  metrics::HistogramBatch request_times;
  while (budget > 0 && state_ != State::kGone) {
    Message* m = NextMessage();
    if (m == nullptr) break;
    if (LeaseLapsed()) [[unlikely]] {
      // This run began inside the lease and outlasted it (the process
      // stalled or was frozen): a message taken now, perhaps one that came
      // while the cluster was moving this grain, waits like the rest.
      // The next run parks it, as at the start of a run.
      HoldBack(m);
      budget = 0;
      break;
    }
    --budget;
    if (m->kind == MessageKind::kRequest) {
      // Used from the moment each request is taken, before its reply can
      // reach the caller: shedding (Runtime::Shed) must never see a grain
      // that just answered as the least recently used one, even when one
      // long run serves requests that came far apart.
      MarkActive(real_clock);
    }
    // What the message is, read before Process may free it.
    uint32_t method = kNoMethod;
    const MessageLabel label = LabelOf(m, &method);
    ++received[static_cast<int>(label)];
    Process(m);
    const int64_t end = MonoNanos();
    if (run.finished != nullptr) {  // a request finished in this turn
      request_times.Add(run.finished,
                        static_cast<uint64_t>(end - run.finished_start));
      run.finished = nullptr;
    }
    turn_times.Add(metrics.turn_duration,
                   static_cast<uint64_t>(end - run.turn_start_ns));
    if (end - run.turn_start_ns >= silo_->internals().slow_turn_ns()) {
      SlowTurn(label, method, end - run.turn_start_ns);
    }
    run.turn_start_ns = end;
    if (state_ == State::kActive && deactivate_requested_ && running_.empty()) {
      BeginDeactivation(deactivation_reason_);
    }
    if (pushed_back_by_ != nullptr) break;  // the next turn waits
  }
  for (int i = 0; i < static_cast<int>(received.size()); ++i) {
    if (received[i] != 0) {
      metrics.received(static_cast<MessageLabel>(i))->Inc(received[i]);
    }
  }
  turn_times.Flush();
  request_times.Flush();
  // Between runs the activation holds nothing of its last turn's request
  // (the call it served is its cancellation token).
  run.turn.request = RequestContext();
  run_ = nullptr;
  if (Activation* target = std::exchange(pushed_back_by_, nullptr)) {
    if (state_ != State::kActive) {
      target->Unref();
    } else if (Park(target)) {
      return;
    }
  }
  if (state_ == State::kGone) {
    Unref();
    return;
  }
  EndRun(budget);
}

void Activation::MarkActive(bool real_clock) {
  // With the system clock the idle clock is the monotonic one and the
  // turn's start (already read) stands in for "now": no extra clock read.
  last_active_ns_.store(
      real_clock ? run_->turn_start_ns : silo_->internals().IdleClockNs(),
      std::memory_order_relaxed);
}

void Activation::EndRun(int budget) {
  pending_.fetch_sub(popped_, std::memory_order_seq_cst);
  popped_ = 0;
  if (budget == 0 || HasReadyWork()) {
    silo_->internals().scheduler().Schedule(this);  // still scheduled
    return;
  }
  refs_.fetch_add(1, std::memory_order_relaxed);  // see refs_
  scheduled_.store(false, std::memory_order_seq_cst);
  if (pending_.load(std::memory_order_seq_cst) > 0 &&
      !scheduled_.exchange(true, std::memory_order_seq_cst)) {
    silo_->internals().scheduler().Schedule(this);
  }
  Unref();
}

absl::Time Activation::TurnNow() {
  if (run_ == nullptr) return silo_->clock()->Now();
  if (run_->now == absl::InfinitePast()) run_->now = silo_->clock()->Now();
  return run_->now;
}

void Activation::SlowTurn(MessageLabel label, uint32_t method, int64_t nanos) {
  const absl::Duration took = absl::Nanoseconds(nanos);
  silo_->internals().metrics().slow_turns->Inc();
  const InterfaceInfo& iface = *type_->info->interface;
  absl::string_view what;
  switch (label) {
    case MessageLabel::kRequest:
    case MessageLabel::kOneWay:
      what = method < iface.method_count ? iface.methods[method].name
                                         : absl::string_view("?");
      break;
    case MessageLabel::kReminder:
      what = "ReceiveReminder";
      break;
    case MessageLabel::kResponse:
    case MessageLabel::kResume:
      what = "(continuation)";
      break;
    case MessageLabel::kTimer:
      what = "(timer)";
      break;
    default:
      what = "(lifecycle)";
  }
  GRANARY_LOG(kWarning) << "grain=" << LogQuote(id_.ToString())
                        << " method=" << what
                        << " turn_ms=" << absl::ToDoubleMilliseconds(took)
                        << " slow turn: held a worker longer than "
                        << absl::FormatDuration(
                               silo_->options().slow_turn_threshold);
}

void Activation::Process(Message* m) {
  switch (m->kind) {
    case MessageKind::kResponse: {
      auto* call = static_cast<CallBase*>(m);
      run_->turn.request = call->request_context();
      call->waiter().resume();
      return;
    }
    case MessageKind::kResume: {
      auto* resume = static_cast<ResumeMessage*>(m);
      run_->turn.request = resume->request;
      resume->handle.resume();  // may take its result from `resume`
      delete resume;
      return;
    }
    case MessageKind::kDeadline: {
      auto* notice = static_cast<DeadlineNotice*>(m);
      CallBase* call = notice->call;
      delete notice;
      run_->turn.request = call->request_context();
      CallRef hold(call);  // the notice's reference, kept until resumed
      call->waiter().resume();
      return;
    }
    case MessageKind::kRequest: {
      const int left =
          queued_calls_.fetch_sub(1, std::memory_order_seq_cst) - 1;
      if (has_room_waiters_.load(std::memory_order_seq_cst) &&
          left <= silo_->options().max_mailbox / 2) {
        WakeRoomWaiters();
      }
      StartRequest(static_cast<CallBase*>(m));
      return;
    }
    case MessageKind::kTimer:
      StartTick(static_cast<GrainTimer*>(m));
      return;
    case MessageKind::kControl:
      HandleControl(m);
      return;
  }
}

void Activation::StartRequest(CallBase* call) {
  if (call->cancelled()) {
    // Its caller has had CANCELLED (or DEADLINE_EXCEEDED): it never runs.
    CountFailure(call, absl::StatusCode::kCancelled);
    call->Release();
    return;
  }
  // One-way calls have no deadline: no need to read the clock for them.
  if (call->deadline() != absl::InfiniteFuture() &&
      call->deadline() < TurnNow()) {
    CountFailure(call, absl::StatusCode::kDeadlineExceeded);
    call->Fail(absl::DeadlineExceededError(
        absl::StrCat("request to ", id_.ToString(), " expired before it ran")));
    call->Release();
    return;
  }
  if (call->method() == kReminderMethod) {
    StartReminderTick(call);
    return;
  }
  const MethodInfo& method = type_->info->interface->methods[call->method()];
  running_.push_back(Running{call, /*is_timer=*/false, method.read_only,
                             call->request_context().chain_id,
                             run_->turn_start_ns,
                             /*filters=*/nullptr});
  if (stateless_) running_requests_.fetch_add(1, std::memory_order_relaxed);
  call->set_callee(this);
  run_->turn.request = call->request_context();
  // The turn's token (CurrentCancellation) is its call; one-way calls have
  // none.
  run_->turn.request.cancel = call->one_way() ? CancelRef() : CancelRef(call);
  if (!silo_->internals().incoming_filters().empty()) {
    // The filters change the turn's context: what the method then sees.
    if (FilterRun* run =
            FilterRun::Start(silo_->internals().incoming_filters(),
                             call->target(), method, call->caller_grain(),
                             run_->turn.request.caller != nullptr
                                 ? absl::string_view(*run_->turn.request.caller)
                                 : absl::string_view(),
                             run_->turn.request, &Activation::FiltersDone, this,
                             call, nullptr)) {
      // A filter suspended: Abandon ends the run if the activation goes
      // first.
      FindRunning(call)->filters = run;
    }
    return;
  }
  Invoke(call);
}

void Activation::Invoke(CallBase* call) {
  try {
    type_->info->invokers[call->method()](grain_.get(), call);
  } catch (...) {
    // The method threw before its coroutine started (e.g. out of memory).
    OnRequestDone(call, call->TryClaim(),
                  StatusFromException(std::current_exception()));
  }
}

void Activation::FiltersDone(void* owner, CallBase* call, const void*,
                             bool suspended, absl::Status status) {
  auto* self = static_cast<Activation*>(owner);
  if (suspended) self->FindRunning(call)->filters = nullptr;
  if (status.ok() && call->cancelled()) {
    status = absl::CancelledError(
        absl::StrCat("request to ", self->id_.ToString(),
                     " was cancelled in its call filters"));
  }
  // The deadline may have passed while a filter awaited something.
  if (status.ok() && suspended && call->deadline() != absl::InfiniteFuture() &&
      call->deadline() < self->TurnNow()) {
    status = absl::DeadlineExceededError(absl::StrCat(
        "request to ", self->id_.ToString(), " expired in its call filters"));
  }
  if (!status.ok()) {
    self->OnRequestDone(call, call->TryClaim(), std::move(status));
    return;
  }
  self->Invoke(call);
}

void Activation::CountFailure(CallBase* call, absl::StatusCode code) {
  const uint32_t method = call->method();
  const InterfaceInfo& iface = *type_->info->interface;
  if (method < iface.method_count) {
    silo_->internals().metrics().CountError(
        iface, method, type_->metrics->methods[method], code);
  }
}

void Activation::OnRequestDone(CallBase* call, bool claimed,
                               absl::Status status) {
  const int64_t started = RemoveRunning(call);
  if (stateless_ && started != 0 && call->method() != kReminderMethod) {
    running_requests_.fetch_sub(1, std::memory_order_relaxed);
  }
  const uint32_t method = call->method();
  if (method < type_->info->interface->method_count && started != 0) {
    MethodMetrics& m = type_->metrics->methods[method];
    // Timed when the turn ends (one clock read serves both), unless another
    // request finishing in this turn already holds the slot.
    if (run_ == nullptr) {  // not in a turn: timed now
      m.duration->ObserveUnits(static_cast<uint64_t>(MonoNanos() - started));
    } else {
      if (run_->finished != nullptr) {
        run_->finished->ObserveUnits(
            static_cast<uint64_t>(MonoNanos() - run_->finished_start));
      }
      run_->finished = m.duration;
      run_->finished_start = started;
    }
    if (!status.ok()) {
      silo_->internals().metrics().CountError(*type_->info->interface, method,
                                              m, status.code());
    }
  }
  if (claimed) call->Deliver(std::move(status));
  call->Release();  // the callee's reference
}

Activation::Running* Activation::FindRunning(Message* m) {
  return &*std::find_if(running_.begin(), running_.end(),
                        [m](const Running& r) { return r.msg == m; });
}

int64_t Activation::RemoveRunning(Message* m) {
  auto it = std::find_if(running_.begin(), running_.end(),
                         [m](const Running& r) { return r.msg == m; });
  if (it == running_.end()) return 0;
  const int64_t started = it->start_ns;
  running_.erase(it);
  return started;
}

}  // namespace granary::silo
