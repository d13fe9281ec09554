#include "silo/runtime/grain.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "core/callback_task.h"
#include "core/detach.h"
#include "core/log.h"
#include "core/status.h"
#include "granary/v1/cluster.pb.h"
#include "silo/runtime/activation.h"
#include "silo/runtime/reminder_service.h"
#include "silo/runtime/runtime.h"
#include "storage/grain_storage.h"

namespace granary {
namespace {

// Suspends the calling turn while a store's task (storage, reminders) runs.
// The task is started detached; when it finishes (on a storage or gRPC
// thread, or inline) its result goes into a resume message that is posted
// through the silo's gate to the activation that started it, so grain code
// always resumes as a turn of its own activation, never on the store's
// thread, and a result that arrives after the activation was abandoned (or
// the silo stopped) is dropped instead of touching either.
template <typename Result>
struct ResultMessage final : ResumeMessage {
  std::optional<Result> result;
};

template <typename Result>
class StorageAwaiter {
 public:
  // `latency` (a histogram of the silo's) records how long the operation
  // took. `Result` is a status or status-or: an exception the task throws
  // arrives as its status.
  StorageAwaiter(silo::Activation* activation, metrics::Histogram* latency,
                 Task<Result> operation)
      : activation_(activation),
        latency_(latency),
        operation_(std::move(operation)) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    auto* msg = new ResultMessage<Result>();
    msg->handle = h;
    if (TurnContext* turn = CurrentTurn()) msg->request = turn->request;
    msg_ = msg;
    Detach(std::move(operation_),
           [msg, gate = activation_->silo()->internals().gate(),
            id = activation_->id(),
            activation_id = activation_->activation_id(), latency = latency_,
            started = granary::MonoNanos()](absl::StatusOr<Result> r) {
             msg->result.emplace(Flatten(std::move(r)));
             if (!gate->Post(id, activation_id, msg, latency, started)) {
               delete msg;
             }
           });
  }
  // The message is alive until the resumed turn suspends again.
  Result await_resume() { return std::move(*msg_->result); }

 private:
  silo::Activation* activation_;
  metrics::Histogram* latency_;
  Task<Result> operation_;
  ResultMessage<Result>* msg_ = nullptr;
};

}  // namespace

void Grain::PersistState(google::protobuf::Message* state) { state_ = state; }

Task<void> Grain::WriteState() {
  if (state_ == nullptr) {
    throw StatusError(absl::FailedPreconditionError(
        "WriteState: the grain declared no persistent state (PersistState)"));
  }
  storage::GrainStorage& store = activation_->silo()->internals().storage();
  std::string bytes = state_->SerializeAsString();
  absl::StatusOr<std::string> etag =
      co_await StorageAwaiter<absl::StatusOr<std::string>>(
          activation_, activation_->silo()->internals().metrics().storage_write,
          store.Write(GetGrainId(), std::move(bytes), state_etag_));
  if (!etag.ok()) {
    // The state in memory is not what is stored (this write failed, or its
    // outcome is unknown, or another writer moved the etag): the
    // activation goes once idle, and the next call loads what is stored.
    activation_->DeactivateOnIdle();
    throw StatusError(etag.status());
  }
  state_etag_ = *std::move(etag);
}

Task<void> Grain::ClearState() {
  if (state_ == nullptr) {
    throw StatusError(absl::FailedPreconditionError(
        "ClearState: the grain declared no persistent state (PersistState)"));
  }
  storage::GrainStorage& store = activation_->silo()->internals().storage();
  absl::StatusOr<std::string> cleared =
      co_await StorageAwaiter<absl::StatusOr<std::string>>(
          activation_, activation_->silo()->internals().metrics().storage_clear,
          store.Clear(GetGrainId(), state_etag_));
  if (!cleared.ok()) {
    activation_->DeactivateOnIdle();  // as in WriteState
    throw StatusError(cleared.status());
  }
  state_->Clear();
  state_etag_ = *std::move(cleared);  // "" or the tombstone's etag
}

namespace internal {

Task<void> LoadGrainState(Grain* grain) {
  if (grain->state_ == nullptr) co_return;
  silo::Activation* activation = grain->activation_;
  if (activation->stateless()) {
    // Many activations of one grain would overwrite each other's state.
    throw StatusError(absl::FailedPreconditionError(absl::StrCat(
        activation->id().ToString(),
        " is a stateless worker: it cannot keep persistent state")));
  }
  storage::GrainStorage& store = activation->silo()->internals().storage();
  const GrainId& id = activation->id();
  absl::StatusOr<storage::StoredState> stored =
      co_await StorageAwaiter<absl::StatusOr<storage::StoredState>>(
          activation, activation->silo()->internals().metrics().storage_read,
          store.Read(id));
  if (!stored.ok()) throw StatusError(stored.status());
  if (stored->exists && !grain->state_->ParseFromString(stored->bytes)) {
    throw StatusError(absl::DataLossError(
        absl::StrCat("stored state of ", id.ToString(), " does not parse as ",
                     grain->state_->GetTypeName())));
  }
  grain->state_etag_ = stored->etag;
}

Task<absl::Status> SendMigration(silo::CallRouter* router,
                                 v1::MigrationRequest request) {
  co_return co_await FromCallback<absl::Status>(
      [&](std::function<void(absl::Status)> done) {
        router->MigrateOut(std::move(request), "", std::move(done));
      });
}

Task<void> MigrateGrainOut(Grain* grain) {
  silo::Activation* activation = grain->activation_;
  silo::CallRouter* router = activation->silo()->internals().router();
  if (router == nullptr) {
    throw StatusError(absl::FailedPreconditionError(
        "a silo alone has nowhere to migrate a grain to"));
  }
  v1::MigrationRequest request;
  v1::DirectoryEntry* from = request.mutable_from();
  from->set_type(std::string(activation->id().type()));
  from->set_key(activation->id().key());
  from->set_activation_id(activation->activation_id());
  if (grain->state_ != nullptr) {
    request.set_has_state(true);
    grain->state_->SerializeToString(request.mutable_state());
    request.set_etag(grain->state_etag_);
  }
  grain->OnDehydrate(request.mutable_extra());
  absl::Status moved = co_await StorageAwaiter<absl::Status>(
      activation, nullptr, SendMigration(router, std::move(request)));
  if (!moved.ok()) {
    // Nowhere to go (a silo alone, the last silos of a cluster stopping)
    // is routine; any other failure is worth a warning.
    if (moved.code() == absl::StatusCode::kFailedPrecondition) {
      GRANARY_LOG(kInfo) << "grain=" << LogQuote(activation->id().ToString())
                         << " was not migrated (it deactivates instead): "
                         << moved;
    } else {
      GRANARY_LOG(kWarning)
          << "grain=" << LogQuote(activation->id().ToString())
          << " was not migrated (it deactivates instead): " << moved;
    }
    throw StatusError(std::move(moved));
  }
}

void RehydrateGrain(Grain* grain, const std::string& extra) {
  grain->OnRehydrate(extra);
}

}  // namespace internal

const GrainId& Grain::GetGrainId() const { return activation_->id(); }

void Grain::MigrateOnIdle() {
  if (activation_->stateless()) {
    throw StatusError(absl::FailedPreconditionError(absl::StrCat(
        activation_->id().ToString(),
        " is a stateless worker: its activations are not migrated")));
  }
  activation_->MigrateOnIdle();
}

void Grain::DeactivateOnIdle() { activation_->DeactivateOnIdle(); }

TimerId Grain::RegisterTimer(std::function<Task<void>()> tick,
                             absl::Duration due, absl::Duration period) {
  return activation_->RegisterTimer(std::move(tick), due, period);
}

void Grain::CancelTimer(TimerId id) { activation_->CancelTimer(id); }

Task<void> Grain::ReceiveReminder(const ReminderTick& tick) {
  throw StatusError(absl::FailedPreconditionError(
      absl::StrCat("grain type ", GetGrainId().type(), " registered reminder '",
                   tick.name, "' but does not override ReceiveReminder")));
  co_return;
}

Task<void> Grain::RegisterReminder(std::string name, absl::Duration due,
                                   absl::Duration period) {
  silo::ReminderService& reminders =
      activation_->silo()->internals().reminders();
  absl::StatusOr<absl::Time> first_tick =
      co_await StorageAwaiter<absl::StatusOr<absl::Time>>(
          activation_,
          activation_->silo()->internals().metrics().reminder_write,
          reminders.Register(GetGrainId(), name, due, period));
  if (!first_tick.ok()) {
    // It may have been registered all the same (an answer lost): accept
    // whatever ticks of it come.
    activation_->ForgetReminder(name);
    throw StatusError(first_tick.status());
  }
  activation_->NoteReminder(name, *first_tick);
}

Task<bool> Grain::UnregisterReminder(std::string name) {
  silo::ReminderService& reminders =
      activation_->silo()->internals().reminders();
  absl::StatusOr<bool> removed = co_await StorageAwaiter<absl::StatusOr<bool>>(
      activation_, activation_->silo()->internals().metrics().reminder_remove,
      reminders.Unregister(GetGrainId(), name));
  if (!removed.ok()) {
    activation_->ForgetReminder(name);  // removed or not: unknown
    throw StatusError(removed.status());
  }
  activation_->NoteReminder(name, absl::InfinitePast());
  co_return *removed;
}

Task<std::vector<ReminderTick>> Grain::GetReminders() const {
  silo::ReminderService& reminders =
      activation_->silo()->internals().reminders();
  if (!reminders.has_keeper()) {
    co_return reminders.ListHere(GetGrainId());
  }
  absl::StatusOr<std::vector<ReminderTick>> listed =
      co_await StorageAwaiter<absl::StatusOr<std::vector<ReminderTick>>>(
          activation_, activation_->silo()->internals().metrics().reminder_list,
          reminders.List(GetGrainId()));
  if (!listed.ok()) throw StatusError(listed.status());
  co_return *std::move(listed);
}

const std::string& Grain::SiloName() const {
  return activation_->silo()->name();
}

uint64_t Grain::ActivationId() const { return activation_->activation_id(); }

absl::Time Grain::Now() const { return activation_->silo()->clock()->Now(); }

CallInvoker* Grain::Invoker() const { return activation_->silo(); }

void GrainEvent::await_suspend(std::coroutine_handle<> h) {
  waiter_ = h;
  TurnContext* turn = CurrentTurn();
  if (turn != nullptr) saved_ = *turn;
}

void GrainEvent::Set() {
  set_ = true;
  if (!waiter_) return;
  auto h = std::exchange(waiter_, {});
  TurnContext ctx = saved_;
  ScopedTurn scoped(&ctx);
  h.resume();
}

namespace internal {

void FinishRequest(CallBase* call, bool claimed, absl::Status status) {
  static_cast<silo::Activation*>(call->callee())
      ->OnRequestDone(call, claimed, std::move(status));
}

void KeepStream(CallBase* call) {
  static_cast<silo::Activation*>(call->callee())->KeepStream(call);
}

void StreamRequestDone(void* ctx) {
  auto* call = static_cast<CallBase*>(ctx);
  auto h = std::coroutine_handle<internal::TaskPromise<void>>::from_address(
      call->callee_frame());
  absl::Status status;
  bool claimed = false;
  if (h.promise().exception()) {
    status = StatusFromException(h.promise().exception());
    claimed = call->TryClaim();
  }
  h.destroy();  // drops the method's own writer
  call->set_callee_frame(nullptr);
  FinishRequest(call, claimed, std::move(status));
}

}  // namespace internal
}  // namespace granary
