#include "silo/runtime/scheduler.h"

#include <utility>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/thread_top.h"

namespace granary::silo {
namespace {

struct WorkerIdentity {
  const Scheduler* scheduler = nullptr;
  int index = -1;
};

WorkerIdentity& Self() {
  thread_local WorkerIdentity self;
  return self;
}

// The HelpScope open on this thread, if any.
thread_local Scheduler::HelpScope* help_scope = nullptr;
// True while this thread runs a kept runnable.
thread_local bool helping = false;
// While helping: the scheduler helped, the runnable running now, and the
// helper's LIFO slot (what it runs next).
thread_local const Scheduler* helped = nullptr;
thread_local Runnable* helper_running = nullptr;
thread_local Runnable* helper_next = nullptr;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

Scheduler::Scheduler(int workers, int idle_spin, bool allow_help)
    : idle_spin_(idle_spin < 0 ? 0 : idle_spin),
      allow_help_(allow_help),
      slots_(workers > 0 ? workers : 1) {}

Scheduler::~Scheduler() { Stop(); }

absl::Status Scheduler::Start() {
  if (!threads_.empty()) {
    return absl::FailedPreconditionError("scheduler already started");
  }
  {
    MutexLock lock(&mu_);
    stopping_ = false;
  }
  stop_flag_.store(false, std::memory_order_relaxed);
  for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
    threads_.emplace_back([this, i] {
      RunThreadTop(absl::StrCat("worker_", i), [this, i] { WorkerLoop(i); });
    });
  }
  return absl::OkStatus();
}

void Scheduler::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    stop_flag_.store(true, std::memory_order_relaxed);
    cv_.SignalAll();
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  // A helper that saw the scheduler running finishes its run first.
  while (helpers_.load(std::memory_order_seq_cst) != 0) {
    absl::SleepFor(absl::Microseconds(100));
  }
}

void Scheduler::Schedule(Runnable* r) {
  WorkerIdentity& self = Self();
  if (self.scheduler == this) {
    Slot& slot = slots_[self.index];
    Runnable* displaced = slot.next;
    slot.next = r;
    if (displaced == nullptr) return;
    r = displaced;
  } else if (helped == this && r != helper_running &&
             !stop_flag_.load(std::memory_order_relaxed)) {
    // A helper's run scheduling another runnable: the helper runs it next.
    Runnable* displaced = helper_next;
    helper_next = r;
    if (displaced == nullptr) return;
    r = displaced;
  }
  if (HelpScope* scope = help_scope;
      allow_help_ && scope != nullptr && scope->scheduler_ == this &&
      scope->kept_ == nullptr &&
      sleeping_.load(std::memory_order_relaxed) ==
          static_cast<int>(slots_.size()) &&
      !stop_flag_.load(std::memory_order_relaxed)) {
    scope->kept_ = r;
    return;
  }
  PushShared(r);
}

bool Scheduler::Helping() { return helping; }

Scheduler::HelpScope::HelpScope(Scheduler* scheduler) : scheduler_(scheduler) {
  // Scopes do not nest: an inner one (a run that dispatches) keeps nothing.
  if (help_scope == nullptr && !helping) {
    help_scope = this;
  } else {
    open_ = false;
  }
}

Scheduler::HelpScope::~HelpScope() {
  if (open_) help_scope = nullptr;
  if (kept_ != nullptr) scheduler_->PushShared(std::exchange(kept_, nullptr));
}

void Scheduler::HelpScope::RunKept() {
  if (open_) {
    help_scope = nullptr;
    open_ = false;
  }
  Runnable* r = std::exchange(kept_, nullptr);
  if (r == nullptr) return;
  scheduler_->helpers_.fetch_add(1, std::memory_order_seq_cst);
  if (scheduler_->stop_flag_.load(std::memory_order_seq_cst)) {
    // Stopping: left unrun, like everything queued.
    scheduler_->helpers_.fetch_sub(1, std::memory_order_seq_cst);
    scheduler_->PushShared(r);
    return;
  }
  helping = true;
  helped = scheduler_;
  for (int runs = 1;; ++runs) {
    helper_running = r;
    r->Run();
    r = std::exchange(helper_next, nullptr);
    if (r == nullptr) break;
    if (runs >= kHelperRuns ||
        scheduler_->stop_flag_.load(std::memory_order_relaxed)) {
      scheduler_->PushShared(r);  // the workers take it from here
      break;
    }
  }
  helper_running = nullptr;
  helped = nullptr;
  helping = false;
  scheduler_->helpers_.fetch_sub(1, std::memory_order_seq_cst);
}

void Scheduler::PushShared(Runnable* r) {
  r->next_runnable_ = nullptr;
  MutexLock lock(&mu_);
  if (tail_ == nullptr) {
    head_ = tail_ = r;
  } else {
    tail_->next_runnable_ = r;
    tail_ = r;
  }
  shared_size_.fetch_add(1, std::memory_order_release);
  WakeOneLocked();
}

void Scheduler::WakeOneLocked() {
  // One wake-up in flight is enough: the woken worker wakes the next one if
  // it finds more work than it can take. A burst of pushes costs one futex
  // call, not one per push. A spinning worker is as good as a woken one: it
  // takes the work, or sees it under mu_ before it sleeps, and wakes the
  // next worker if it finds more than it can take.
  if (sleepers_ > 0 && !wakeup_pending_ &&
      spinning_.load(std::memory_order_relaxed) == 0) {
    wakeup_pending_ = true;
    cv_.Signal();
  }
}

Runnable* Scheduler::PopShared() {
  if (shared_size_.load(std::memory_order_acquire) == 0) return nullptr;
  MutexLock lock(&mu_);
  Runnable* r = head_;
  if (r == nullptr) return nullptr;
  head_ = r->next_runnable_;
  if (head_ == nullptr) tail_ = nullptr;
  shared_size_.fetch_sub(1, std::memory_order_relaxed);
  if (head_ != nullptr) WakeOneLocked();  // more work than this worker
  return r;
}

void Scheduler::WorkerLoop(int index) {
  WorkerIdentity& self = Self();
  self.scheduler = this;
  self.index = index;
  Slot& slot = slots_[index];
  int slot_runs = 0;
  while (!stop_flag_.load(std::memory_order_relaxed)) {
    Runnable* r = nullptr;
    if (slot.next != nullptr && slot_runs < kMaxSlotRuns) {
      r = slot.next;
      slot.next = nullptr;
      ++slot_runs;
    } else {
      r = PopShared();
      slot_runs = 0;
      if (r == nullptr && slot.next != nullptr) {
        r = slot.next;
        slot.next = nullptr;
      } else if (r != nullptr && slot.next != nullptr) {
        // Let the shared queue's item run first; the slot item waits its turn
        // in the shared queue where an idle worker can take it.
        PushShared(slot.next);
        slot.next = nullptr;
      }
    }
    if (r != nullptr) {
      r->Run();
      continue;
    }
    // Nothing to do: spin briefly, then sleep. While this worker spins,
    // pushes wake no sleeper (WakeOneLocked).
    bool found = false;
    spinning_.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < idle_spin_; ++i) {
      if (shared_size_.load(std::memory_order_relaxed) > 0) {
        found = true;
        break;
      }
      CpuRelax();
    }
    if (found) {
      spinning_.fetch_sub(1, std::memory_order_relaxed);
      continue;
    }
    MutexLock lock(&mu_);
    // Under mu_: a push that saw this worker spinning, and so woke no one,
    // is in the queue now and is taken below.
    spinning_.fetch_sub(1, std::memory_order_relaxed);
    if (stopping_) break;
    if (head_ != nullptr) continue;
    ++sleepers_;
    sleeping_.fetch_add(1, std::memory_order_relaxed);
    cv_.Wait(&mu_);
    sleeping_.fetch_sub(1, std::memory_order_relaxed);
    --sleepers_;
    wakeup_pending_ = false;
    if (stopping_) break;
  }
  self.scheduler = nullptr;
  self.index = -1;
}

}  // namespace granary::silo
