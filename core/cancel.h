// File: core/cancel.h
// -----------------------------------------------------------------------------
// Cancellation: how a caller that no longer wants an answer tells the grain
// that computes it, and every call made on that call's behalf.
//
// Every awaited call is a cancellation scope (CallBase derives from
// CancelState). A call made by a turn is registered under the call that turn
// serves, so cancelling a call cancels the calls its grain made for it, on
// this silo directly and on other silos through the gateway protocol
// (RequestBatch.cancels). A call is cancelled by
//   - its caller: CallOptions::cancel, a token of a CancellationSource;
//   - a gRPC client that cancels its call to a grain service;
//   - its deadline passing (the caller gets DEADLINE_EXCEEDED, the grain's
//     token fires as for a cancel).
// A cancelled call that is still queued never runs; its caller gets
// CANCELLED at once. A running turn sees its call's token:
//
//   granary::Task<Result> Crunch(const Job& job) {
//     granary::CancellationToken cancel = granary::CurrentCancellation();
//     for (const Step& step : job.steps()) {
//       cancel.ThrowIfCancelled();   // ends the turn with CANCELLED
//       co_await RunStep(step);
//     }
//     ...
//   }
//   co_await granary::CurrentCancellation();  // until the caller gives up
//
// From the SDK:
//   granary::CancellationSource source;
//   granary::CallOptions options;
//   options.cancel = source.token();
//   auto reply = counter.Add(request, options);  // run it on some thread
//   source.Cancel();                             // from any other
//
// Threading: everything here is thread-safe. CancelState's mutex guards its
// lists; a state's mutex may be taken while its parent's is held, never the
// other way round.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "core/sync.h"

namespace granary {

class CancelState;
class MessageSink;
struct ResumeMessage;

// Receives the cancellation of a call that went to another process: the
// network stream that carries it (rpc/gateway_client_stream.h) sends a cancel.
class CancelForwarder {
 public:
  // Called with the call's state locked: must not block or re-enter it.
  virtual void ForwardCancel(uint64_t id) = 0;

 protected:
  ~CancelForwarder() = default;
};

namespace internal {
class CancelAwaiter;
}  // namespace internal

// A reference-counted cancellation scope: a flag that is set once, the
// scopes registered under it (cancelled with it) and the coroutines waiting
// for it.
class CancelState {
 public:
  CancelState() = default;
  CancelState(const CancelState&) = delete;
  CancelState& operator=(const CancelState&) = delete;

  bool cancelled() const { return cancelled_.load(std::memory_order_seq_cst); }

  void AddRef() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Cancels this scope and, once, everything under it: OnCancelled() runs,
  // the forwarder (if any) is told, registered scopes are cancelled and
  // waiting coroutines resume. Idempotent; any thread.
  void Cancel();

  // Registers this scope under `parent` (null: none), for good: cancelling
  // the parent cancels this one. False when the parent is cancelled already
  // (nothing is registered; the caller cancels this scope itself).
  bool Adopt(CancelState* parent);

  // Tells `forwarder` of a cancel, with `id`, until ClearForwarder. False
  // (and nothing is set) when this scope is cancelled already.
  bool SetForwarder(CancelForwarder* forwarder, uint64_t id);
  // The forwarder set, which is not told anything once this returns.
  CancelForwarder* ClearForwarder();

 protected:
  virtual ~CancelState();
  // Runs once, first, on the thread that cancels (no lock held).
  virtual void OnCancelled() {}

 private:
  friend class internal::CancelAwaiter;

  // Takes a reference unless the count is already 0 (being destroyed).
  bool TryAddRef();
  // The intrusive lists of children and waiters (next_, prev_, linked_).
  template <typename Node>
  static void PushFront(Node*& head, Node* node) {
    node->next_ = head;
    node->prev_ = nullptr;
    if (head != nullptr) head->prev_ = node;
    head = node;
    node->linked_ = true;
  }
  template <typename Node>
  static void Remove(Node*& head, Node* node) {
    if (node->prev_ != nullptr) {
      node->prev_->next_ = node->next_;
    } else {
      head = node->next_;
    }
    if (node->next_ != nullptr) node->next_->prev_ = node->prev_;
    node->linked_ = false;
  }
  // Removes `child` from the children (its destructor).
  void Unlink(CancelState* child);

  std::atomic<int> refs_{1};
  std::atomic<bool> cancelled_{false};
  CancelState* parent_ = nullptr;  // holds a reference; set once by Adopt
  Mutex mu_;
  // Registered scopes, a doubly linked list through next_/prev_ (fields of
  // the children, guarded by this scope's mu_).
  CancelState* children_ ABSL_GUARDED_BY(mu_) = nullptr;
  CancelState* next_ = nullptr;
  CancelState* prev_ = nullptr;
  bool linked_ = false;  // in parent_'s list; guarded by parent_->mu_
  internal::CancelAwaiter* waiters_ ABSL_GUARDED_BY(mu_) = nullptr;
  CancelForwarder* forwarder_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t forward_id_ ABSL_GUARDED_BY(mu_) = 0;
};

// A reference to a CancelState, or to nothing (never cancelled).
class CancelRef {
 public:
  CancelRef() = default;
  // Takes a new reference on `s`.
  explicit CancelRef(CancelState* s) : s_(s) {
    if (s_ != nullptr) s_->AddRef();
  }
  CancelRef(const CancelRef& o) : CancelRef(o.s_) {}
  CancelRef(CancelRef&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  CancelRef& operator=(CancelRef o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  ~CancelRef() {
    if (s_ != nullptr) s_->Release();
  }
  CancelState* get() const { return s_; }
  explicit operator bool() const { return s_ != nullptr; }

 private:
  CancelState* s_ = nullptr;
};

// What grain code and callers see of a cancellation scope. Cheap to copy; a
// default-constructed token is never cancelled.
class CancellationToken {
 public:
  CancellationToken() = default;
  explicit CancellationToken(CancelRef state) : state_(std::move(state)) {}

  bool IsCancelled() const {
    return state_.get() != nullptr && state_.get()->cancelled();
  }
  // Throws StatusError(CANCELLED) when cancelled: in grain code, the turn
  // ends with that status (its caller has had CANCELLED already).
  void ThrowIfCancelled() const;
  // co_await token: resumes once the token is cancelled (at once when it
  // is). In grain code the coroutine resumes as a turn of its activation;
  // elsewhere on the thread that cancels. Awaiting a token that can never
  // be cancelled (default-constructed) throws StatusError
  // (FAILED_PRECONDITION).
  internal::CancelAwaiter operator co_await() const;

  CancelState* state() const { return state_.get(); }

 private:
  CancelRef state_;
};

// Owns a cancellation scope a caller cancels by hand (.NET's
// CancellationTokenSource). With a parent token, cancelling the parent
// cancels this source too.
class CancellationSource {
 public:
  CancellationSource();
  explicit CancellationSource(const CancellationToken& parent);
  CancellationSource(const CancellationSource&) = delete;
  CancellationSource& operator=(const CancellationSource&) = delete;
  ~CancellationSource();

  void Cancel() { state_->Cancel(); }
  bool IsCancelled() const { return state_->cancelled(); }
  CancellationToken token() const {
    return CancellationToken(CancelRef(state_));
  }

 private:
  CancelState* state_;
};

// The token of the request the running turn serves: cancelled when its
// caller cancels or its deadline passes. Outside grain code, and in timer
// and reminder turns, a token that is never cancelled.
CancellationToken CurrentCancellation();

namespace internal {

// Waits for a CancelState (CancellationToken::operator co_await).
class CancelAwaiter {
 public:
  explicit CancelAwaiter(CancelRef state) : state_(std::move(state)) {}
  CancelAwaiter(CancelAwaiter&& o) noexcept : state_(std::move(o.state_)) {}
  ~CancelAwaiter();
  bool await_ready() const noexcept {
    return state_.get() != nullptr && state_.get()->cancelled();
  }
  bool await_suspend(std::coroutine_handle<> h);
  void await_resume() const noexcept {}

 private:
  friend class granary::CancelState;
  // Resumes the coroutine; runs with the state's mutex held, so it only
  // posts (in grain code) or hands back the handle to resume after.
  std::coroutine_handle<> Fire();

  CancelRef state_;
  std::coroutine_handle<> handle_;
  // In grain code: the message Fire posts to the turn's activation, which
  // carries the turn's request context.
  ResumeMessage* message_ = nullptr;
  MessageSink* sink_ = nullptr;  // that activation
  CancelAwaiter* next_ = nullptr;
  CancelAwaiter* prev_ = nullptr;
  bool linked_ = false;
};

}  // namespace internal
}  // namespace granary
