#include "silo/runtime/runtime.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/callback_task.h"
#include "core/log.h"
#include "core/opaque_call.h"
#include "core/process.h"
#include "core/sync.h"
#include "core/version.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "granary/v1/cluster.pb.h"
#include "silo/runtime/idle_collection.h"
#include "silo/runtime/reminder_service.h"
#include "storage/memory_storage.h"

namespace granary::silo {

namespace {

int DefaultWorkers(int requested) {
  if (requested > 0) return requested;
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

Runtime::Runtime(RuntimeOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::System()),
      metrics_(&registry_),
      remote_memory_(options_.remote_memory_limit),
      owned_storage_(options_.storage == nullptr
                         ? std::make_unique<storage::MemoryStorage>()
                         : nullptr),
      storage_(options_.storage != nullptr ? options_.storage
                                           : owned_storage_.get()),
      owned_reminders_(options_.reminders == nullptr
                           ? std::make_unique<storage::MemoryReminderTable>()
                           : nullptr),
      timers_(clock_, options_.timer_thread),
      scheduler_(DefaultWorkers(options_.workers), options_.idle_spin,
                 options_.network_turns),
      collector_(std::make_unique<IdleCollector>(this)),
      pressure_check_(std::make_unique<PressureCheck>(this)),
      gate_(std::make_shared<SiloGate>(&catalog_)) {
  InitProcess();
  if (options_.turn_budget < 1) options_.turn_budget = 1;
  slow_turn_ns_ = absl::ToInt64Nanoseconds(options_.slow_turn_threshold);
  if (options_.min_reminder_period < absl::Milliseconds(1)) {
    options_.min_reminder_period = absl::Milliseconds(1);
  }
  reminders_ = std::make_unique<ReminderService>(
      this,
      options_.reminders != nullptr ? options_.reminders
                                    : owned_reminders_.get(),
      options_.min_reminder_period,
      ReminderQuotas{options_.max_reminders_per_grain, options_.max_reminders});
  AddSiloMetrics();
}

void Runtime::AddSiloMetrics() {
  using metrics::Samples;
  using metrics::Type;
  registry_.AddCallback(
      "granary_silo_info", "This silo: its name and Granary version.",
      Type::kGauge, {"silo", "version"}, [this] {
        return Samples{{{options_.name, std::string(kVersion)}, 1}};
      });
  registry_.AddCallback(
      "granary_remote_memory_bytes",
      "Bytes of remote calls the silo holds for its client connections "
      "(unfinished requests, unwritten replies, one-way messages not yet "
      "run), and the limit past which the gateways stop reading "
      "(--silo_memory_budget; 0: none).",
      Type::kGauge, {"kind"}, [this] {
        return Samples{
            {{"used"}, static_cast<double>(remote_memory_.used())},
            {{"limit"}, static_cast<double>(remote_memory_.limit())}};
      });
  registry_.AddCallback(
      "granary_directory_entries", "Grain directory entries held by this silo.",
      Type::kGauge, {}, [this] {
        return Samples{{{}, static_cast<double>(DirectoryEntries())}};
      });
  registry_.AddCallback(
      "granary_calls_forwarded_total",
      "Calls this silo passed on to the silo that hosts (or will host) their "
      "grain.",
      Type::kCounter, {}, [this] {
        return Samples{{{},
                        static_cast<double>(
                            router_ != nullptr ? router_->Forwarded() : 0)}};
      });
  registry_.AddCallback(
      "granary_membership_silos",
      "Silos in the membership view, by status. A silo without a cluster "
      "is a membership of one.",
      Type::kGauge, {"status"}, [this] {
        {
          MutexLock lock(&membership_mu_);
          if (membership_view_) {
            double joining = 0, active = 0, shutting_down = 0, dead = 0;
            const v1::MembershipView view = membership_view_();
            for (const v1::Member& m : view.members()) {
              switch (m.status()) {
                case v1::MEMBER_JOINING:
                  ++joining;
                  break;
                case v1::MEMBER_ACTIVE:
                  ++active;
                  break;
                case v1::MEMBER_SHUTTING_DOWN:
                  ++shutting_down;
                  break;
                case v1::MEMBER_DEAD:
                  ++dead;
                  break;
                default:
                  break;
              }
            }
            return Samples{{{"joining"}, joining},
                           {{"active"}, active},
                           {{"shutting_down"}, shutting_down},
                           {{"dead"}, dead}};
          }
        }
        const State s = state_.load(std::memory_order_acquire);
        const bool active = s == State::kRunning;
        const bool stopping = s == State::kStopping;
        return Samples{{{"joining"}, s == State::kNew ? 1.0 : 0.0},
                       {{"active"}, active ? 1.0 : 0.0},
                       {{"shutting_down"}, stopping ? 1.0 : 0.0},
                       {{"dead"}, s == State::kStopped ? 1.0 : 0.0}};
      });
  registry_.AddCallback(
      "granary_lease_waits_total",
      "Times a worker found this silo's membership lease expired and waited "
      "for the cluster to confirm it (grain code does not run meanwhile).",
      Type::kCounter, {}, [this] {
        return Samples{{{}, static_cast<double>(lease_waits())}};
      });
  registry_.AddCallback(
      "granary_reminders", "Durable reminders scheduled by this silo.",
      Type::kGauge, {}, [this] {
        return Samples{{{}, static_cast<double>(reminders_->size())}};
      });
  registry_.AddCallback(
      "granary_reminder_ticks_total",
      "Reminder ticks that finished, by result (ok or failed).", Type::kCounter,
      {"result"}, [this] {
        return Samples{
            {{"ok"}, static_cast<double>(reminders_->ticks_ok())},
            {{"failed"}, static_cast<double>(reminders_->ticks_failed())}};
      });
  // Stateless worker types: how many workers, and the calls queued at them.
  auto workers = [this](bool queued) {
    Samples out;
    if (state_.load(std::memory_order_acquire) == State::kNew) return out;
    for (const auto& [name, entry] : types_) {
      if (!entry->info->interface->stateless_worker) continue;
      size_t n = 0;
      size_t q = 0;
      catalog_.CountWorkers(name, &n, &q);
      out.push_back({{name}, static_cast<double>(queued ? q : n)});
    }
    return out;
  };
  registry_.AddCallback(
      "granary_stateless_workers",
      "Activations of stateless worker grains on this silo, by type.",
      Type::kGauge, {"type"}, [workers] { return workers(false); });
  registry_.AddCallback(
      "granary_stateless_queue_depth",
      "Calls queued at stateless worker activations on this silo, by type.",
      Type::kGauge, {"type"}, [workers] { return workers(true); });
  metrics::AddProcessMetrics(&registry_);
}

std::vector<Runtime::TypeView> Runtime::TypeViews() const {
  std::vector<TypeView> out;
  for (const auto& [name, entry] : types_) {
    out.push_back(TypeView{entry->info->interface, entry->metrics.get()});
  }
  return out;
}

Runtime::~Runtime() {
  Stop();
  reminders_.reset();  // before the timer queue it used
}

absl::Status Runtime::AddGrainType(
    const GrainClassInfo& info,
    std::function<std::unique_ptr<Grain>()> factory) {
  if (state_.load() != State::kNew) {
    return absl::FailedPreconditionError(
        "grain types must be added before the silo starts");
  }
  std::string name(info.interface->type_name);
  if (types_.contains(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("grain type ", name, " is already registered"));
  }
  auto entry = std::make_unique<GrainTypeEntry>();
  entry->info = &info;
  entry->factory = std::move(factory);
  entry->metrics = metrics_.ForType(*info.interface);
  entry->idle_timeout = info.interface->idle_timeout_s > 0
                            ? absl::Seconds(info.interface->idle_timeout_s)
                            : options_.idle_timeout;
  types_by_pointer_.emplace_back(info.interface->type_name.data(), entry.get());
  types_.emplace(std::move(name), std::move(entry));
  return absl::OkStatus();
}

std::vector<const GrainClassInfo*> Runtime::GrainTypes() const {
  std::vector<const GrainClassInfo*> out;
  for (const auto& [name, entry] : types_) {
    if (entry->hosted) out.push_back(entry->info);
  }
  return out;
}

absl::Status Runtime::Start() {
  State expected = State::kNew;
  if (!state_.compare_exchange_strong(expected, State::kRunning)) {
    return absl::FailedPreconditionError("silo already started");
  }
  // Reminders are read (and their ticks queued) before anything runs; a
  // table that cannot be read keeps the silo from starting.
  if (absl::Status loaded = reminders_->Start(); !loaded.ok()) {
    state_.store(State::kStopped);
    return loaded;
  }
  GRANARY_RETURN_IF_ERROR(scheduler_.Start());
  GRANARY_RETURN_IF_ERROR(timers_.Start());
  timers_.Schedule(collector_.get(),
                   clock_->Now() + options_.collection_period);
  if (options_.max_activations > 0 || options_.memory_limit > 0) {
    timers_.Schedule(pressure_check_.get(),
                     clock_->Now() + options_.pressure_period);
  }
  GRANARY_LOG(kInfo) << "silo=" << options_.name
                     << " workers=" << scheduler_.workers()
                     << " grain_types=" << types_.size() << " started";
  return absl::OkStatus();
}

void Runtime::Stop() {
  State expected = State::kRunning;
  if (!state_.compare_exchange_strong(expected, State::kStopping)) {
    if (expected == State::kNew) {
      state_.store(State::kStopped);
      gate_->Close();
    }
    return;
  }
  // 1. Deactivate every activation (OnDeactivate runs); no new ones start,
  // no reminder tick is sent.
  reminders_->Stop();
  catalog_.ForEach([](Activation* a) { a->RequestShutdown(); });
  // The budget runs on the silo's clock (an InProcessCluster's FakeClock
  // moves while it stops its silos), and never longer than the same budget
  // in real time (a test's clock that stands still does not hold the stop
  // up). A fenced silo runs no grain code again, so none would deactivate:
  // it does not wait.
  const absl::Time give_up = clock_->Now() + options_.shutdown_timeout;
  const absl::Time real_give_up = absl::Now() + options_.shutdown_timeout;
  {
    MutexLock lock(&gone_mu_);
    while (catalog_.size() > 0 && !fenced_.load(std::memory_order_acquire)) {
      const absl::Duration left = give_up - clock_->Now();
      if (left <= absl::ZeroDuration() || absl::Now() >= real_give_up) break;
      // Woken when an activation leaves; on another clock than the
      // system's, also every 10 ms to read that clock again.
      (void)gone_cv_.WaitWithDeadline(
          &gone_mu_,
          std::min(
              real_give_up,
              absl::Now() + (clock_ == Clock::System()
                                 ? left
                                 : std::min(left, absl::Milliseconds(10)))));
    }
  }
  // 2. Stop timers and workers.
  timers_.Cancel(collector_.get());
  {
    MutexLock lock(&lease_mu_);
    if (lease_timer_armed_) timers_.Cancel(&lease_timer_);
    lease_timer_armed_ = false;
    lease_timers_stopped_ = true;
    lease_parked_.clear();  // abandoned below with the rest
  }
  timers_.Stop();
  scheduler_.Stop();
  // 3. Whatever did not deactivate in time is abandoned.
  std::vector<Activation*> stuck = catalog_.TakeAll();
  if (!stuck.empty()) {
    GRANARY_LOG(kWarning) << "silo=" << options_.name
                          << " abandoned=" << stuck.size()
                          << (fenced_.load()
                                  ? " activations (declared dead: no grain "
                                    "code runs here again)"
                                  : " activations did not deactivate in time");
  }
  const absl::Status unavailable = absl::UnavailableError(
      absl::StrCat("silo ", options_.name, " shut down"));
  for (Activation* a : stuck) a->Abandon(unavailable);
  // They are deleted whatever their references; senders waiting for room in
  // their mailboxes are let go first, each once.
  const absl::flat_hash_set<Activation*> deleted(stuck.begin(), stuck.end());
  for (Activation* a : stuck) a->ForgetRoomWaiters(deleted);
  for (Activation* a : stuck) delete a;
  // Storage operations still pending complete into nothing from here on.
  gate_->Close();
  state_.store(State::kStopped);
  GRANARY_LOG(kInfo) << "silo=" << options_.name << " activated=" << activated()
                     << " deactivated=" << deactivated()
                     << " abandoned=" << stuck.size() << " stopped";
}

const GrainTypeEntry* Runtime::FindType(absl::string_view type) const {
  // Generated references name their type with the same static string the
  // registered interface holds, so comparing pointers finds them at once.
  for (const auto& [name, entry] : types_by_pointer_) {
    if (name == type.data()) return entry;
  }
  auto it = types_.find(type);
  return it == types_.end() ? nullptr : it->second.get();
}

void Runtime::Invoke(CallBase* call) {
  // We own one reference: Deliver passes it on, the error paths drop it.
  const GrainTypeEntry* type = FindType(call->target().type());
  absl::Status refused;
  if (call->method() == kOpaqueMethod) {
    InvokeOpaque(call, type);
    return;
  }
  if (type == nullptr) {
    refused = absl::UnimplementedError(
        absl::StrCat("unknown grain type ", call->target().type(), " (silo ",
                     options_.name, " hosts no such type)"));
  } else if (call->method() >= type->info->interface->method_count) {
    refused = absl::UnimplementedError(
        absl::StrCat("grain type ", call->target().type(), " has no method #",
                     call->method()));
  } else if (const State s = state_.load(std::memory_order_acquire);
             s == State::kNew || (s == State::kStopped && router_ == nullptr)) {
    // A stopped silo of a cluster still routes calls to the grains' new
    // homes until its endpoints close.
    refused = absl::UnavailableError(
        absl::StrCat("silo ", options_.name, " is not running"));
  }
  if (!refused.ok()) {
    call->Fail(std::move(refused));
    call->Release();
    return;
  }
  if (TurnContext* turn = CurrentTurn()) {  // sent by grain code
    (call->one_way() ? metrics_.sent_one_way : metrics_.sent_requests)->Inc();
    if (!outgoing_filters_.empty() && turn->invoker == this) {
      // The deadline runs from now: a filter's time counts, and a filter
      // that never finishes does not leave the caller waiting for ever.
      ArmDeadline(call);
      FilterOutgoing(call, type);
      return;
    }
  }
  Admit(call, type);
}

void Runtime::InvokeReminder(CallBase* call) {
  const GrainTypeEntry* type = FindType(call->target().type());
  absl::Status refused;
  if (type == nullptr && router_ != nullptr &&
      !router_->HostedTypeName(call->target().type()).empty() &&
      state_.load(std::memory_order_acquire) == State::kRunning) {
    // A type unknown here (a later release's): to the grain's silo.
    ArmDeadline(call);
    router_->Route(call);
    return;
  }
  if (type == nullptr || (!type->hosted && router_ == nullptr)) {
    refused = absl::UnimplementedError(absl::StrCat(
        "reminder for ", call->target().ToString(), ": silo ", options_.name,
        " hosts no grain type ", call->target().type()));
  } else if (state_.load(std::memory_order_acquire) != State::kRunning) {
    refused = absl::UnavailableError(
        absl::StrCat("silo ", options_.name, " is not running"));
  }
  if (!refused.ok()) {
    call->Fail(std::move(refused));
    call->Release();
    return;
  }
  Admit(call, type);
}

void Runtime::Admit(CallBase* call, const GrainTypeEntry* type) {
  ArmDeadline(call);
  Deliver(call, type);
}

void Runtime::ArmDeadline(CallBase* call) {
  // Once stopped the timers no longer run: a call only passing through is
  // given its deadline where it is sent next.
  if (!call->one_way() &&
      state_.load(std::memory_order_acquire) != State::kStopped) {
    call->set_deadline(clock_->Now() + call->timeout());
    call->ArmDeadline(&timers_);
  }
}

void Runtime::Deliver(CallBase* call, const GrainTypeEntry* type) {
  if (!type->hosted) {
    // Known here, hosted elsewhere (--grain_types).
    if (router_ == nullptr) {
      call->Fail(absl::UnimplementedError(
          absl::StrCat("silo ", options_.name, " does not host grain type ",
                       call->target().type(), " (--grain_types)")));
      call->Release();
    } else if (type->info->interface->stateless_worker) {
      router_->RouteWorker(call);
    } else {
      router_->Route(call);
    }
    return;
  }
  if (type->info->interface->stateless_worker) {
    DeliverToWorker(call, type);
    return;
  }
  if (router_ != nullptr) {
    if (catalog_.PostIfExists(call->target(), call)) {
      metrics_.directory_hits->Inc();
      return;
    }
    metrics_.directory_misses->Inc();
    router_->Route(call);
    return;
  }
  bool created = false;
  absl::Status refused;
  const bool delivered =
      catalog_.PostOrCreate(call->target(), call, [&]() -> Activation* {
        if (stopping()) return nullptr;
        refused = MayActivate();
        if (!refused.ok()) return nullptr;
        created = true;
        // A silo alone places everything on itself, and its catalog is the
        // whole directory: created under the shard's writer lock, the
        // activation is the grain's only one (in a cluster the router chose
        // this silo before the call came here).
        const uint64_t activation_id =
            next_activation_id_.fetch_add(1, std::memory_order_relaxed);
        return new Activation(this, type, call->target(), activation_id);
      });
  if (delivered) {
    (created ? metrics_.directory_misses : metrics_.directory_hits)->Inc();
  }
  if (!delivered) FailUnactivated(call, std::move(refused));
}

void Runtime::FailUnactivated(CallBase* call, absl::Status refused) {
  if (refused.ok()) {
    refused = absl::UnavailableError(
        absl::StrCat("silo ", options_.name, " is shutting down; ",
                     call->target().ToString(), " cannot be activated"));
  }
  call->Fail(std::move(refused));
  call->Release();
}

void Runtime::ActivateHere(CallBase* call, uint64_t activation_id) {
  const GrainTypeEntry* type = FindType(call->target().type());
  absl::Status refused;
  const bool delivered =
      type != nullptr && type->hosted &&
      catalog_.PostOrCreate(call->target(), call, [&]() -> Activation* {
        if (stopping()) return nullptr;
        refused = MayActivate();
        if (!refused.ok()) return nullptr;
        return new Activation(this, type, call->target(), activation_id);
      });
  if (!delivered) FailUnactivated(call, std::move(refused));
}

uint64_t Runtime::ActiveId(const GrainId& id) {
  uint64_t found = 0;
  catalog_.Find(id, [&found](Activation* a) { found = a->activation_id(); });
  return found;
}

void Runtime::OnActivationRemoved(Activation* a) {
  if (a->stateless()) return;  // never in the directory
  if (router_ != nullptr) {
    router_->OnActivationGone(a->id(), a->activation_id());
  }
}

size_t Runtime::DirectoryEntries() const {
  return router_ != nullptr ? router_->DirectoryEntries() : catalog_.grains();
}

void Runtime::Reroute(CallBase* call) {
  const GrainTypeEntry* type = FindType(call->target().type());
  Deliver(call, type);
}

void Runtime::OnActivationGone(Activation*) {
  if (stopping()) {
    MutexLock lock(&gone_mu_);
    gone_cv_.SignalAll();
  }
}

namespace {

struct SerializedCall {
  Runtime::SerializedDone done;
};

void SerializedCallDone(void* ctx, CallBase* call) {
  std::unique_ptr<SerializedCall> c(static_cast<SerializedCall*>(ctx));
  if (!call->status().ok()) {
    c->done(call->status());
    return;
  }
  std::string out;
  if (!call->reply().SerializeToString(&out)) {
    c->done(absl::InternalError("reply failed to serialize"));
    return;
  }
  c->done(std::move(out));
}

}  // namespace

void Runtime::InvokeSerialized(absl::string_view type_name, std::string key,
                               absl::string_view method_name,
                               absl::string_view payload, CallOptions options,
                               SerializedDone done) {
  const GrainTypeEntry* type = FindType(type_name);
  if (type == nullptr) {
    done(absl::UnimplementedError(
        absl::StrCat("unknown grain type ", type_name)));
    return;
  }
  if (absl::Status valid = ValidateGrainKey(key); !valid.ok()) {
    done(std::move(valid));
    return;
  }
  const InterfaceInfo& iface = *type->info->interface;
  const MethodInfo* method = iface.FindMethod(method_name);
  if (method == nullptr) {
    done(absl::UnimplementedError(absl::StrCat(
        "grain type ", type_name, " has no method ", method_name)));
    return;
  }
  google::protobuf::io::ArrayInputStream bytes(
      payload.data(), static_cast<int>(payload.size()));
  absl::StatusOr<CallBase*> made =
      NewCallFromWire(iface, *method, std::move(key), &bytes, options.timeout);
  if (!made.ok()) {
    done(made.status());
    return;
  }
  CallBase* call = *made;
  if (method->one_way) {
    Invoke(call);
    done(std::string());
    return;
  }
  call->SetDoneCallback(&SerializedCallDone,
                        new SerializedCall{std::move(done)});
  Invoke(call);
}

Task<absl::StatusOr<std::string>> Runtime::CallSerialized(std::string type,
                                                          std::string key,
                                                          std::string method,
                                                          std::string payload,
                                                          CallOptions options) {
  co_return co_await FromCallback<absl::StatusOr<std::string>>(
      [&](SerializedDone done) {
        InvokeSerialized(type, std::move(key), method, payload, options,
                         std::move(done));
      });
}

}  // namespace granary::silo
