// File: core/memory_budget.h
// -----------------------------------------------------------------------------
// A byte budget shared by the producers of one kind of memory (a silo's
// unfinished remote calls, queued replies and undelivered one-way
// messages). Charging never fails: a producer that finds the budget over
// its limit stops taking input (a gateway stops reading its stream) and,
// if nothing of its own is outstanding to wake it, waits to be woken.
//
//   MemoryBudget budget(256 << 20);
//   budget.Charge(n);                  // a request taken in
//   if (budget.Over() && budget.WakeWhenUnder(&waiter)) { ...stop... }
//   budget.Release(n);                 // its reply written: may wake waiters
//
// Threading: thread-safe. Charge and Release are one atomic add each; the
// lock is taken only by waiters and by a Release that brings the budget
// back under its limit while someone waits.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "core/sync.h"

namespace granary {

class MemoryBudget {
 public:
  // Something that stopped because the budget was over. Wake() runs once,
  // on the thread whose Release brought the budget under its limit (or
  // that called WakeAll), with no lock held.
  class Waiter {
   public:
    virtual void Wake() = 0;

   protected:
    ~Waiter() = default;
  };

  // limit <= 0: unlimited (never over).
  explicit MemoryBudget(int64_t limit) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  int64_t limit() const { return limit_; }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  bool Over() const { return limit_ > 0 && used() >= limit_; }

  void Charge(int64_t bytes) {
    used_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void Release(int64_t bytes) {
    const int64_t now =
        used_.fetch_sub(bytes, std::memory_order_seq_cst) - bytes;
    if (limit_ > 0 && now < limit_ &&
        has_waiters_.load(std::memory_order_seq_cst)) {
      WakeAll();
    }
  }

  // Registers `w` to be woken once the budget is under its limit. False
  // (and not registered) when it already is, so the caller goes on; true
  // when `w` will be woken. A waiter registered twice is woken once.
  bool WakeWhenUnder(Waiter* w) {
    if (limit_ <= 0) return false;
    {
      MutexLock lock(&mu_);
      waiters_.insert(w);
      has_waiters_.store(true, std::memory_order_seq_cst);
    }
    // Checked after publishing has_waiters_: a Release that went under
    // before this sees has_waiters_ (and wakes w) or this sees its result.
    if (used_.load(std::memory_order_seq_cst) >= limit_) return true;
    return !Cancel(w);
  }

  // Removes `w` if it waits; true when it did (it will not be woken).
  bool Cancel(Waiter* w) {
    MutexLock lock(&mu_);
    const bool erased = waiters_.erase(w) > 0;
    if (waiters_.empty()) has_waiters_.store(false, std::memory_order_relaxed);
    return erased;
  }

  // Wakes every waiter now (a stopping silo, or the budget went under).
  void WakeAll() {
    std::vector<Waiter*> woken;
    {
      MutexLock lock(&mu_);
      woken.assign(waiters_.begin(), waiters_.end());
      waiters_.clear();
      has_waiters_.store(false, std::memory_order_relaxed);
    }
    for (Waiter* w : woken) w->Wake();
  }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
  std::atomic<bool> has_waiters_{false};
  Mutex mu_;
  absl::flat_hash_set<Waiter*> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary
