// Activation's lifecycle (silo/runtime/activation.h): activation with its
// state loaded, deactivation with its state written, abandonment, idle
// collection and shutdown.
#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "granary/v1/cluster.pb.h"
#include "silo/runtime/activation.h"
#include "silo/runtime/call_filter.h"
#include "silo/runtime/grain_timer.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

const char* DeactivationReasonName(DeactivationReason r) {
  switch (r) {
    case DeactivationReason::kIdle:
      return "idle";
    case DeactivationReason::kRequested:
      return "requested";
    case DeactivationReason::kShutdown:
      return "shutdown";
    case DeactivationReason::kActivationFailed:
      return "activation_failed";
    case DeactivationReason::kMemoryPressure:
      return "memory_pressure";
    case DeactivationReason::kMigrating:
      return "migrating";  // it stayed: the move failed
    case DeactivationReason::kMigrated:
      return "migrated";
  }
  return "unknown";
}

void Activation::StartLifecycle(Task<void> task, void (*done)(void*)) {
  lifecycle_ = task.Release();
  lifecycle_.promise().set_done(done, this);
  run_->turn.request = RootContext();
  lifecycle_.resume();
}

absl::Status Activation::TakeLifecycleResult() {
  absl::Status status;
  if (lifecycle_.promise().exception()) {
    status = StatusFromException(lifecycle_.promise().exception());
  }
  lifecycle_.destroy();
  lifecycle_ = {};
  return status;
}

namespace {

Task<void> LoadThenActivate(Grain* grain) {
  co_await internal::LoadGrainState(grain);
  co_await grain->OnActivate();
}

// A migrated activation: its state came with it (AwaitMove).
Task<void> RehydrateThenActivate(Grain* grain, std::string extra) {
  internal::RehydrateGrain(grain, extra);
  co_await grain->OnActivate();
}

}  // namespace

Activation::Extras::Extras() = default;
Activation::Extras::~Extras() = default;

void Activation::AwaitMove(std::unique_ptr<Grain> grain,
                           std::unique_ptr<v1::MigrationRequest> incoming) {
  state_ = State::kActivating;  // calls are held; no lifecycle runs yet
  extras().moving_grain = std::move(grain);
  extras().moving_in = std::move(incoming);
}

void Activation::BeginActivation() {
  state_ = State::kActivating;
  if (AwaitingMove()) {
    grain_ = std::move(extras_->moving_grain);
    std::string extra = std::move(*extras_->moving_in->mutable_extra());
    extras_->moving_in.reset();
    grain_->activation_ = this;
    try {
      StartLifecycle(RehydrateThenActivate(grain_.get(), std::move(extra)),
                     [](void* self) {
                       auto* a = static_cast<Activation*>(self);
                       a->OnActivated(a->TakeLifecycleResult());
                     });
    } catch (...) {
      OnActivated(StatusFromException(std::current_exception()));
    }
    return;
  }
  try {
    grain_ = type_->factory();
  } catch (...) {
    grain_ = nullptr;
    OnActivated(StatusFromException(std::current_exception()));
    return;
  }
  if (grain_ == nullptr) {
    OnActivated(absl::InternalError("grain factory returned null"));
    return;
  }
  grain_->activation_ = this;
  try {
    // Persistent state (if the grain declares it) loads before OnActivate.
    StartLifecycle(LoadThenActivate(grain_.get()), [](void* self) {
      auto* a = static_cast<Activation*>(self);
      a->OnActivated(a->TakeLifecycleResult());
    });
  } catch (...) {
    OnActivated(StatusFromException(std::current_exception()));
  }
}

void Activation::OnActivated(absl::Status status) {
  if (status.ok()) {
    state_ = State::kActive;
    silo_->internals().CountActivated();
    return;
  }
  activation_status_ =
      absl::Status(status.code(), absl::StrCat("activation of ", id_.ToString(),
                                               " failed: ", status.message()));
  GRANARY_LOG(kWarning) << "grain=" << LogQuote(id_.ToString()) << " "
                        << activation_status_;
  // Fail what is queued now; later arrivals are routed to a new activation.
  DrainMailbox();
  if (held_ != nullptr) {
    held_->waiting.ForEach([this](Message* m) {
      if (m->kind == MessageKind::kRequest) {
        auto* call = static_cast<CallBase*>(m);
        CountFailure(call, activation_status_.code());
        call->Fail(activation_status_);
        call->Release();
      }
    });
    held_->waiting.clear();
  }
  state_ = State::kDeactivating;
  deactivation_reason_ = DeactivationReason::kActivationFailed;
  OnDeactivated();
}

void Activation::BeginDeactivation(DeactivationReason reason) {
  state_ = State::kDeactivating;
  if (stateless_) retiring_.store(true, std::memory_order_relaxed);
  deactivation_reason_ = reason;
  if (extras_ != nullptr) {
    for (auto& [id, timer] : extras_->timers) {
      if (silo_->internals().timers().Cancel(timer)) {
        delete timer;
      } else {
        timer->cancelled =
            true;  // in flight to the mailbox; freed when drained
      }
    }
    extras_->timers.clear();
  }
  try {
    StartLifecycle(grain_->OnDeactivate(), [](void* self) {
      auto* a = static_cast<Activation*>(self);
      a->silo_->internals().CountDeactivated();
      absl::Status s = a->TakeLifecycleResult();
      if (!s.ok()) {
        GRANARY_LOG(kWarning) << "grain=" << LogQuote(a->id_.ToString())
                              << " OnDeactivate failed: " << s;
      }
      a->AfterOnDeactivate();
    });
  } catch (...) {
    GRANARY_LOG(kWarning) << "grain=" << LogQuote(id_.ToString())
                          << " OnDeactivate threw before starting";
    OnDeactivated();
  }
}

void Activation::AfterOnDeactivate() {
  if (deactivation_reason_ == DeactivationReason::kMigrating &&
      grain_ != nullptr &&
      (!silo_->internals().stopping() || silo_->internals().handing_off())) {
    try {
      StartLifecycle(internal::MigrateGrainOut(grain_.get()), [](void* self) {
        auto* a = static_cast<Activation*>(self);
        a->deactivation_reason_ = a->TakeLifecycleResult().ok()
                                      ? DeactivationReason::kMigrated
                                      : DeactivationReason::kRequested;
        a->OnDeactivated();
      });
      return;
    } catch (...) {
      // Not moved: a plain deactivation.
    }
  }
  OnDeactivated();
}

void Activation::OnDeactivated() {
  if (deactivation_reason_ == DeactivationReason::kMigrating) {
    deactivation_reason_ = DeactivationReason::kRequested;  // it stayed
  }
  type_->metrics->deactivated[static_cast<int>(deactivation_reason_)]->Inc();
  type_->metrics->activations->Add(-1);
  silo_->internals().catalog().Remove(this);
  silo_->internals().OnActivationRemoved(this);
  // No sender can reach us now; whatever was posted before is in the mailbox.
  DrainMailbox();
  if (held_ != nullptr)
    held_->waiting.ForEach([this](Message* m) {
      switch (m->kind) {
        case MessageKind::kRequest:
          silo_->internals().Reroute(static_cast<CallBase*>(m));
          break;
        case MessageKind::kTimer:
          delete static_cast<GrainTimer*>(m);
          break;
        case MessageKind::kControl:
          break;
        case MessageKind::kResponse:
        case MessageKind::kDeadline:
        case MessageKind::kResume:
          DropAnswer(m);
          break;
      }
    });
  if (held_ != nullptr) held_->waiting.clear();
  // Subscribers see the end and subscribe again: a new activation.
  EndStreams(absl::UnavailableError(absl::StrCat(
      "grain ", id_.ToString(), " deactivated; call again to reactivate it")));
  grain_.reset();
  state_ = State::kGone;
  silo_->internals().OnActivationGone(this);
}

void Activation::Abandon(const absl::Status& status) {
  DrainMailbox();
  held();  // made if absent (teardown, once)
  held_->waiting.ForEach([&status](Message* m) {
    if (m->kind == MessageKind::kRequest) {
      auto* call = static_cast<CallBase*>(m);
      call->Fail(status);
      call->Release();
    } else if (m->kind == MessageKind::kTimer) {
      delete static_cast<GrainTimer*>(m);
    }
  });
  held_->waiting.clear();
  // Replies to suspended calls die with the frames that await them.
  held_->responses.ForEach([](Message* m) { DropAnswer(m); });
  held_->responses.clear();
  for (const Running& r : running_) {
    if (!r.is_timer) {
      auto* call = static_cast<CallBase*>(r.msg);
      if (r.filters != nullptr) {
        r.filters->Abandon();
      } else if (call->callee_frame() != nullptr) {
        std::coroutine_handle<>::from_address(call->callee_frame()).destroy();
      }
      call->Fail(status);
      call->Release();
    } else {
      auto* timer = static_cast<GrainTimer*>(r.msg);
      if (timer->frame != nullptr) {
        std::coroutine_handle<>::from_address(timer->frame).destroy();
      }
      if (extras_ != nullptr) extras_->timers.erase(timer->id);
      delete timer;
    }
  }
  running_.clear();
  if (lifecycle_) {
    lifecycle_.destroy();
    lifecycle_ = {};
  }
  if (extras_ != nullptr) {
    for (auto& [id, timer] : extras_->timers) {
      if (silo_->internals().timers().Cancel(timer)) delete timer;
    }
    extras_->timers.clear();
  }
  EndStreams(status);
  grain_.reset();
  type_->metrics->activations->Add(-1);
  state_ = State::kGone;
}

// --- idle collection and shutdown -----------------------------------------

void Activation::MaybeCollect(int64_t now_ns) {
  const int64_t last = last_active_ns_.load(std::memory_order_relaxed);
  if (absl::Nanoseconds(now_ns - last) < type_->idle_timeout) return;
  RequestControl(kCollect);
}

bool Activation::RequestControl(uint8_t request) {
  if (control_requests_.fetch_or(request, std::memory_order_seq_cst) &
      request) {
    return false;
  }
  if (!control_posted_.exchange(true, std::memory_order_seq_cst)) {
    Post(&control_msg_);
  }
  return true;
}

void Activation::RequestShutdown() {
  // A grain waiting on a full mailbox stops too.
  if (RequestControl(kShutdown)) WakeFromPark();
}

void Activation::RequestShed() {
  if (RequestControl(kShed)) WakeFromPark();
}

void Activation::KeepStream(CallBase* call) {
  call->AddRef();
  Extras& e = extras();
  e.streams.push_back(call);
  if (e.streams.size() >= 2 * e.streams_pruned_at + 16) {
    OpenStreams();
    e.streams_pruned_at = e.streams.size();
  }
}

size_t Activation::OpenStreams() {
  if (extras_ == nullptr) return 0;
  std::vector<CallBase*>& streams = extras_->streams;
  size_t kept = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    CallBase* call = streams[i];
    if (call->stream()->closed()) {
      call->Release();
      continue;
    }
    streams[kept++] = call;
  }
  streams.resize(kept);
  return kept;
}

void Activation::EndStreams(const absl::Status& status) {
  if (extras_ == nullptr) return;
  for (CallBase* call : extras_->streams) {
    call->Fail(status);
    call->Release();
  }
  extras_->streams.clear();
  extras_->streams_pruned_at = 0;
}

void Activation::DeactivateOnIdle() {
  deactivate_requested_ = true;
  deactivation_reason_ = DeactivationReason::kRequested;
}

void Activation::MigrateOnIdle() {
  deactivate_requested_ = true;
  deactivation_reason_ = DeactivationReason::kMigrating;
}

void Activation::HandleControl(Message*) {
  // Cleared first: a request set after the read below posts it again.
  control_posted_.store(false, std::memory_order_seq_cst);
  const uint8_t requests =
      control_requests_.fetch_and(kShutdown, std::memory_order_seq_cst);
  if ((requests & (kMoveIn | kMoveFailed)) && AwaitingMove()) {
    if (requests & kMoveIn) {
      BeginActivation();  // held calls run once OnActivate is done
    } else {
      // It never was: the calls it held go where the directory says.
      extras_->moving_in.reset();
      extras_->moving_grain.reset();
      state_ = State::kDeactivating;
      deactivation_reason_ = DeactivationReason::kActivationFailed;
      OnDeactivated();
      return;
    }
  }
  if (requests & kShutdown) {
    // A graceful leave hands the grain to another silo, unless it is
    // deactivating already or asked to (DeactivateOnIdle: its state in
    // memory may differ from what is stored, and must not travel).
    const bool requested =
        deactivate_requested_ &&
        deactivation_reason_ == DeactivationReason::kRequested;
    deactivate_requested_ = true;
    if (state_ != State::kDeactivating && !requested) {
      deactivation_reason_ = silo_->internals().handing_off() && !stateless_
                                 ? DeactivationReason::kMigrating
                                 : DeactivationReason::kShutdown;
    }
  } else if (requests & kCollect) {
    const absl::Duration idle =
        absl::Nanoseconds(silo_->internals().IdleClockNs() -
                          last_active_ns_.load(std::memory_order_relaxed));
    if (state_ == State::kActive && running_.empty() && NoneWaiting() &&
        idle >= type_->idle_timeout && OpenStreams() == 0) {
      BeginDeactivation(DeactivationReason::kIdle);
    }
  }
  if ((requests & (kShutdown | kShed)) == kShed) {
    if (state_ == State::kActive && running_.empty() && NoneWaiting() &&
        queued_calls_.load(std::memory_order_relaxed) == 0 &&
        OpenStreams() == 0) {
      BeginDeactivation(DeactivationReason::kMemoryPressure);
    }
  }
}

}  // namespace granary::silo
