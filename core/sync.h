// File: core/sync.h
// -----------------------------------------------------------------------------
// The synchronization types of the project: Mutex, MutexLock,
// ReaderMutexLock, CondVar and Notification.
//
//   Mutex mu_;
//   int n_ ABSL_GUARDED_BY(mu_);
//   { MutexLock lock(&mu_); ++n_; }
//   mu_.AwaitWithTimeout([&] { return n_ > 3; }, absl::Seconds(1));  // held
//
// They are Abseil's (absl::Mutex and friends) in every normal build. Under
// ThreadSanitizer they are built on the standard library's pthread-backed
// types instead: Debian's Abseil is compiled without TSan's annotations, so
// TSan cannot see absl::Mutex synchronize and would report every guarded
// access as a race. The TSan build thereby checks how the project uses its
// locks; Abseil's Mutex itself is trusted.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#if defined(__SANITIZE_THREAD__)
#define GRANARY_STD_SYNC 1
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#else
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#endif

namespace granary {

#if !defined(GRANARY_STD_SYNC)

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.Lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.Unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.ReaderLock(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.ReaderUnlock(); }
  // With the lock held: waits until pred() holds, releasing the lock while
  // waiting. False when `timeout` passed first.
  template <typename Pred>
  bool AwaitWithTimeout(Pred pred, absl::Duration timeout) {
    return mu_.AwaitWithTimeout(absl::Condition(&pred), timeout);
  }
  template <typename Pred>
  void Await(Pred pred) {
    mu_.Await(absl::Condition(&pred));
  }

 private:
  friend class CondVar;
  absl::Mutex mu_;
};

class CondVar {
 public:
  void Wait(Mutex* mu) { cv_.Wait(&mu->mu_); }
  // True when `deadline` passed before a signal.
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) {
    return cv_.WaitWithDeadline(&mu->mu_, deadline);
  }
  void Signal() { cv_.Signal(); }
  void SignalAll() { cv_.SignalAll(); }

 private:
  absl::CondVar cv_;
};

using Notification = absl::Notification;

#else  // GRANARY_STD_SYNC

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mu_.unlock();
    changed_.notify_all();  // re-evaluate Await conditions, as absl does
  }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  template <typename Pred>
  bool AwaitWithTimeout(Pred pred, absl::Duration timeout) {
    Adopted lock(this);
    return changed_.wait_until(lock, absl::ToChronoTime(absl::Now() + timeout),
                               pred);
  }
  template <typename Pred>
  void Await(Pred pred) {
    Adopted lock(this);
    changed_.wait(lock, pred);
  }

  // BasicLockable, for std::condition_variable_any.
  void lock() { mu_.lock(); }
  void unlock() { Unlock(); }

 private:
  // Lets `changed_` wait on the lock the caller already holds. Releasing it
  // to wait changes no guarded state, so it notifies nobody (and must not:
  // the condition variable holds its own lock while calling unlock()).
  struct Adopted {
    explicit Adopted(Mutex* m) : m(m) {}
    void lock() { m->mu_.lock(); }
    void unlock() { m->mu_.unlock(); }
    Mutex* m;
  };
  std::shared_mutex mu_;
  std::condition_variable_any changed_;
};

class CondVar {
 public:
  void Wait(Mutex* mu) { cv_.wait(*mu); }
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) {
    return cv_.wait_until(*mu, absl::ToChronoTime(deadline)) ==
           std::cv_status::timeout;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

class Notification {
 public:
  Notification() = default;
  ~Notification() { std::lock_guard<std::mutex> lock(mu_); }
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  bool HasBeenNotified() const {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  void WaitForNotification() const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [this] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ = false;
};

#endif  // GRANARY_STD_SYNC

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace granary
