#include "core/cancel.h"

#include "absl/container/inlined_vector.h"
#include "core/call.h"
#include "core/status.h"
#include "core/turn_resume.h"

namespace granary {

CancelState::~CancelState() {
  // Every child and waiter holds a reference: none is left here.
  if (parent_ != nullptr) {
    parent_->Unlink(this);
    parent_->Release();
  }
}

bool CancelState::TryAddRef() {
  int n = refs_.load(std::memory_order_relaxed);
  while (n > 0) {
    if (refs_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

bool CancelState::Adopt(CancelState* parent) {
  if (parent == nullptr) return true;
  MutexLock lock(&parent->mu_);
  // Cancel sets the flag before it takes the lock to collect the children:
  // a child linked now is collected, and one that sees the flag is not.
  if (parent->cancelled()) return false;
  parent->AddRef();
  parent_ = parent;
  PushFront(parent->children_, this);
  return true;
}

void CancelState::Unlink(CancelState* child) {
  MutexLock lock(&mu_);
  if (child->linked_) Remove(children_, child);
}

bool CancelState::SetForwarder(CancelForwarder* forwarder, uint64_t id) {
  MutexLock lock(&mu_);
  if (cancelled()) return false;
  forwarder_ = forwarder;
  forward_id_ = id;
  return true;
}

CancelForwarder* CancelState::ClearForwarder() {
  MutexLock lock(&mu_);
  return std::exchange(forwarder_, nullptr);
}

void CancelState::Cancel() {
  if (cancelled_.exchange(true, std::memory_order_seq_cst)) return;
  OnCancelled();
  absl::InlinedVector<CancelState*, 4> children;
  absl::InlinedVector<std::coroutine_handle<>, 2> resume;
  {
    MutexLock lock(&mu_);
    if (forwarder_ != nullptr) forwarder_->ForwardCancel(forward_id_);
    // A child whose count reached 0 is in its destructor, waiting for this
    // lock to unlink itself: it needs no cancel.
    for (CancelState* c = children_; c != nullptr; c = c->next_) {
      if (c->TryAddRef()) children.push_back(c);
    }
    while (internal::CancelAwaiter* w = waiters_) {
      Remove(waiters_, w);
      if (std::coroutine_handle<> h = w->Fire()) resume.push_back(h);
    }
  }
  for (CancelState* c : children) {
    c->Cancel();
    c->Release();
  }
  for (std::coroutine_handle<> h : resume) h.resume();
}

void CancellationToken::ThrowIfCancelled() const {
  if (IsCancelled()) {
    throw StatusError(absl::CancelledError("the call was cancelled"));
  }
}

internal::CancelAwaiter CancellationToken::operator co_await() const {
  return internal::CancelAwaiter(state_);
}

CancellationSource::CancellationSource() : state_(new CancelState()) {}

CancellationSource::CancellationSource(const CancellationToken& parent)
    : state_(new CancelState()) {
  if (!state_->Adopt(parent.state())) state_->Cancel();
}

CancellationSource::~CancellationSource() { state_->Release(); }

CancellationToken CurrentCancellation() {
  TurnContext* turn = CurrentTurn();
  if (turn == nullptr) return CancellationToken();
  return CancellationToken(turn->request.cancel);
}

namespace internal {

CancelAwaiter::~CancelAwaiter() {
  if (CancelState* s = state_.get(); s != nullptr && handle_) {
    MutexLock lock(&s->mu_);
    if (linked_) CancelState::Remove(s->waiters_, this);
  }
  delete message_;  // not posted: the frame is destroyed without resuming
}

bool CancelAwaiter::await_suspend(std::coroutine_handle<> h) {
  CancelState* s = state_.get();
  if (s == nullptr) {
    // It would never resume: a one-way, timer or reminder turn waiting so
    // would hold its activation for good.
    throw StatusError(absl::FailedPreconditionError(
        "co_await on a cancellation token that nothing can cancel (one-way "
        "calls, timers and reminders have none)"));
  }
  handle_ = h;
  message_ = NewTurnResume(h, &sink_);
  MutexLock lock(&s->mu_);
  if (s->cancelled()) {
    // Cancel may have collected its waiters already: do not wait.
    delete std::exchange(message_, nullptr);
    return false;
  }
  CancelState::PushFront(s->waiters_, this);
  return true;
}

std::coroutine_handle<> CancelAwaiter::Fire() {
  if (sink_ == nullptr) return handle_;
  // The activation may resume (and destroy) this awaiter as soon as the
  // message is posted: nothing of it is touched after.
  sink_->Post(std::exchange(message_, nullptr));
  return {};
}

}  // namespace internal
}  // namespace granary
