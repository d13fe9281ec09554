// File: silo/runtime/scheduler.h
// -----------------------------------------------------------------------------
// The worker pool that runs activations. An activation with work is a
// Runnable in exactly one run queue at a time; a worker takes it and calls
// Run(), which processes up to the turn budget of its messages.
//
//   Scheduler sched(/*workers=*/2);
//   sched.Start();
//   sched.Schedule(&activation);   // any thread
//   sched.Stop();                  // joins the workers
//
// Queues: one shared FIFO, plus a one-item LIFO slot per worker that takes
// what a worker schedules from inside a Run (a grain calling a grain), so a
// request and its reply tend to stay on one warm core without touching the
// shared queue. A worker that ran its slot kMaxSlotRuns times in a row takes
// from the shared queue first, so nothing starves. Idle workers spin briefly,
// then sleep until work is scheduled.
//
// Helping: a thread outside the pool that hands work to it (a gateway's
// network thread dispatching a batch it read) may open a HelpScope. The
// first runnable it then schedules while every worker sleeps is kept, not
// queued, and the thread runs it itself when the scope ends
// (RunKept), with a small turn budget (kHelperTurnBudget): the request
// costs no worker wake-up, and its reply is written by the thread that
// read it. What that run schedules for another runnable (a grain calling a
// grain, a reply resuming its caller) goes to the helper's own one-item
// LIFO slot, like a worker's, and the helper runs it next: an awaited call
// chain that starts at the gateway wakes no worker either. At most
// kHelperRuns runs in all; what is left then, a second runnable scheduled
// while the slot is full, and a run's own leftovers (the runnable
// scheduling itself again) go to the workers. Grain code never blocks a
// turn (storage and calls are awaited), so a helper is held for at most
// kHelperRuns runs of kHelperTurnBudget turns.
//
// Threading: Schedule is thread-safe; Run() of one Runnable never runs on two
// workers at once (callers schedule a Runnable only when it is not queued or
// running; see Activation).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/sync.h"

namespace granary::silo {

class Runnable {
 public:
  virtual void Run() = 0;

 protected:
  ~Runnable() = default;

 private:
  friend class Scheduler;
  Runnable* next_runnable_ = nullptr;
};

class Scheduler {
 public:
  // `idle_spin`: pause instructions an idle worker spins, watching for work,
  // before it sleeps.
  // `allow_help`: HelpScopes may keep work (see above); false: they never
  // do, and every run is a worker's.
  Scheduler(int workers, int idle_spin, bool allow_help = true);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  absl::Status Start();
  // Stops and joins the workers; queued runnables are left unrun. Idempotent.
  void Stop();

  void Schedule(Runnable* r);

  // Messages a run on a helper thread takes at most (see above).
  static constexpr int kHelperTurnBudget = 4;
  // Runs a helper takes in one RunKept, the kept one included.
  static constexpr int kHelperRuns = 16;

  // True on a thread running a kept runnable (HelpScope::RunKept): the
  // run must not block (Activation hands a lease wait to the workers).
  static bool Helping();

  class HelpScope {
   public:
    explicit HelpScope(Scheduler* scheduler);
    // Queues a kept runnable RunKept did not run.
    ~HelpScope();
    HelpScope(const HelpScope&) = delete;
    HelpScope& operator=(const HelpScope&) = delete;

    // Closes the scope and runs the runnable kept in it, if any.
    void RunKept();

   private:
    Scheduler* const scheduler_;
    Runnable* kept_ = nullptr;
    bool open_ = true;
    friend class Scheduler;
  };

  int workers() const { return static_cast<int>(slots_.size()); }

 private:
  static constexpr int kMaxSlotRuns = 16;
  struct alignas(64) Slot {
    Runnable* next = nullptr;  // touched only by its worker
  };

  void WorkerLoop(int index);
  void PushShared(Runnable* r);
  void WakeOneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Runnable* PopShared();

  const int idle_spin_;
  const bool allow_help_;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  Mutex mu_;
  CondVar cv_;
  Runnable* head_ ABSL_GUARDED_BY(mu_) = nullptr;
  Runnable* tail_ ABSL_GUARDED_BY(mu_) = nullptr;
  int sleepers_ ABSL_GUARDED_BY(mu_) = 0;
  // sleepers_, readable without mu_ (HelpScope's "every worker sleeps").
  std::atomic<int> sleeping_{0};
  bool wakeup_pending_ ABSL_GUARDED_BY(mu_) = false;
  // Workers spinning for work (WorkerLoop). Changed by the spinner alone;
  // its decrement before sleeping is under mu_, so a push that reads it
  // under mu_ and sees a spinner knows that spinner will see the push.
  std::atomic<int> spinning_{0};
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> shared_size_{0};
  std::atomic<bool> stop_flag_{false};
  // Helpers inside RunKept: Stop waits for them as for the workers.
  std::atomic<int> helpers_{0};
};

}  // namespace granary::silo
