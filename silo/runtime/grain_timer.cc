// Grain timers (silo/runtime/grain_timer.h): registered by grain code, fired
// by the silo's timer queue, run as messages of their activation; and the
// turns of reminder ticks (silo/runtime/reminder_service.h).
#include "silo/runtime/grain_timer.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "silo/runtime/activation.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

TimerId Activation::RegisterTimer(std::function<Task<void>()> tick,
                                  absl::Duration due, absl::Duration period) {
  auto* t = new GrainTimer;
  t->silo = silo_;
  t->grain = id_;
  t->activation_id = activation_id_;
  Extras& e = extras();
  t->id = e.next_timer_id++;
  t->tick = std::move(tick);
  t->period = period;
  e.timers.emplace(t->id, t);
  silo_->internals().timers().Schedule(t, silo_->clock()->Now() + due);
  return t->id;
}

void Activation::CancelTimer(TimerId id) {
  if (extras_ == nullptr) return;
  auto it = extras_->timers.find(id);
  if (it == extras_->timers.end()) return;
  GrainTimer* t = it->second;
  extras_->timers.erase(it);
  if (silo_->internals().timers().Cancel(t)) {
    delete t;
  } else {
    t->cancelled = true;  // queued or running: freed when it comes back
  }
}

void Activation::StartTick(GrainTimer* timer) {
  if (timer->cancelled) {
    delete timer;
    return;
  }
  const uint64_t chain = NewChainId();
  running_.push_back(Running{timer, /*is_timer=*/true, /*read_only=*/false,
                             chain, run_->turn_start_ns, /*filters=*/nullptr});
  run_->turn.request =
      RequestContext{chain, nullptr, nullptr, TraceContext::NewRoot(), {}};
  timer->owner = this;
  Task<void> task;
  try {
    task = timer->tick();
  } catch (...) {
    GRANARY_LOG(kWarning) << "grain=" << LogQuote(id_.ToString())
                          << " timer tick threw before starting";
    OnTickDone(timer);
    return;
  }
  auto h = task.Release();
  timer->frame = h.address();
  h.promise().set_done(
      [](void* ctx) {
        auto* t = static_cast<GrainTimer*>(ctx);
        auto h =
            std::coroutine_handle<internal::TaskPromise<void>>::from_address(
                t->frame);
        if (h.promise().exception()) {
          GRANARY_LOG(kWarning) << "grain=" << LogQuote(t->grain.ToString())
                                << " timer tick failed: "
                                << StatusFromException(h.promise().exception());
        }
        h.destroy();
        t->frame = nullptr;
        t->owner->OnTickDone(t);
      },
      timer);
  h.resume();
}

void Activation::OnTickDone(GrainTimer* timer) {
  RemoveRunning(timer);
  const bool repeat = !timer->cancelled && state_ == State::kActive &&
                      timer->period > absl::ZeroDuration();
  if (repeat) {
    silo_->internals().timers().Schedule(timer,
                                         silo_->clock()->Now() + timer->period);
    return;
  }
  if (!timer->cancelled && extras_ != nullptr) extras_->timers.erase(timer->id);
  delete timer;
}

void GrainTimer::OnTimer() {
  if (!silo->internals().catalog().PostIfCurrent(grain, activation_id, this))
    delete this;
}

void Activation::NoteReminder(const std::string& name, absl::Time first_tick) {
  extras().reminders[name] = first_tick;
}

void Activation::StartReminderTick(CallBase* call) {
  auto* tick = static_cast<ReminderCall*>(call);
  bool current;
  if (tick->reminder() != nullptr) {
    current = silo_->internals().reminders().IsCurrent(*tick);
  } else {
    const auto& reminders = extras().reminders;
    auto noted = reminders.find(tick->tick().name);
    current =
        noted == reminders.end() || noted->second == tick->tick().first_tick;
  }
  // Two silos may both send a due time while they disagree about who owns
  // the reminder's range (reminder_service.h): it runs once.
  auto& last_ticks = extras().last_ticks;
  auto last = last_ticks.find(tick->tick().name);
  if (current && last != last_ticks.end() &&
      tick->tick().current_tick <= last->second) {
    current = false;
  }
  if (current) last_ticks[tick->tick().name] = tick->tick().current_tick;
  if (!current) {
    // Removed or replaced since it was sent, or this due time ran already:
    // the tick is dropped.
    if (call->TryClaim()) call->Deliver(absl::OkStatus());
    call->Release();
    return;
  }
  running_.push_back(Running{call, /*is_timer=*/false, /*read_only=*/false,
                             call->request_context().chain_id,
                             run_->turn_start_ns,
                             /*filters=*/nullptr});
  call->set_callee(this);
  run_->turn.request = call->request_context();
  try {
    internal::RunRequest(grain_->ReceiveReminder(tick->tick()), call);
  } catch (...) {
    OnRequestDone(call, call->TryClaim(),
                  StatusFromException(std::current_exception()));
  }
}

}  // namespace granary::silo
