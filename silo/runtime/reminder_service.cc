#include "silo/runtime/reminder_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/log.h"
#include "core/status.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

// One scheduled reminder. In exactly one of: the timer queue (waiting for
// `due`), in flight (OnTimer fired and the tick call has not finished), or
// idle only while the service is stopped. Owned by the service: through
// `live_` while scheduled, through `retired_` once removed or replaced while
// in flight.
struct ReminderService::Local final : TimerEntry {
  void OnTimer() override { service->Fire(this); }

  ReminderService* service = nullptr;
  GrainId grain;
  std::string name;
  absl::Time first_tick;
  absl::Duration period;
  absl::Time due;  // of the tick queued or in flight
  bool in_flight = false;
  bool retired = false;
  bool failing = false;  // the last tick failed (logged once per streak)
  uint64_t seq = 0;      // ReminderService::changes_ when installed
};

// Rebalance every `refresh_` while the service runs.
struct ReminderService::RefreshTimer final : TimerEntry {
  void OnTimer() override {
    service->Rebalance();
    MutexLock lock(&service->mu_);
    if (service->running_) {
      service->silo_->internals().timers().Schedule(
          this, service->silo_->clock()->Now() + service->refresh_);
    }
  }
  ReminderService* service = nullptr;
};

void ToTickMessage(const ReminderTick& t, v1::ReminderTickMessage* m) {
  m->set_name(t.name);
  m->set_first_tick_unix_us(absl::ToUnixMicros(t.first_tick));
  m->set_period_us(absl::ToInt64Microseconds(t.period));
  m->set_current_tick_unix_us(absl::ToUnixMicros(t.current_tick));
}

ReminderTick FromTickMessage(const v1::ReminderTickMessage& m) {
  return ReminderTick{m.name(), absl::FromUnixMicros(m.first_tick_unix_us()),
                      absl::Microseconds(m.period_us()),
                      absl::FromUnixMicros(m.current_tick_unix_us())};
}

ReminderCall::ReminderCall(GrainId target, ReminderTick tick,
                           const void* reminder)
    : CallBase(std::move(target), kReminderMethod, /*one_way=*/false),
      tick_(std::move(tick)),
      reminder_(reminder) {
  ToTickMessage(tick_, &request_);
}

absl::StatusOr<CallBase*> ReminderCallFromWire(const InterfaceInfo& iface,
                                               std::string key,
                                               const std::string& payload) {
  v1::ReminderTickMessage m;
  if (!m.ParseFromString(payload)) {
    return absl::InvalidArgumentError("a reminder tick that does not decode");
  }
  if (m.name().empty() || m.name().size() > kMaxReminderNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a reminder tick needs a name of 1 to ",
                     kMaxReminderNameBytes, " bytes"));
  }
  if (m.period_us() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reminder '", m.name(), "': a tick with period ",
                     m.period_us(), "us (must be positive)"));
  }
  auto* call = new ReminderCall(GrainId(iface.type_name, std::move(key)),
                                FromTickMessage(m), /*reminder=*/nullptr);
  // Like the sender's: the tick lasts as long as the grain's turn, in a
  // call chain of its own (the sender's, when the request names one).
  call->set_timeout(absl::InfiniteDuration());
  call->set_request_context(RootContext());
  return call;
}

ReminderService::ReminderService(Runtime* silo, storage::ReminderTable* table,
                                 absl::Duration min_period,
                                 ReminderQuotas quotas)
    : silo_(silo), table_(table), min_period_(min_period), quotas_(quotas) {}

ReminderService::~ReminderService() {
  if (refresh_timer_ != nullptr)
    (void)silo_->internals().timers().Cancel(refresh_timer_.get());
  MutexLock lock(&mu_);
  for (auto& [key, r] : live_) {
    (void)silo_->internals().timers().Cancel(r);
    delete r;
  }
  live_.clear();
  per_grain_.clear();
  for (Local* r : retired_) delete r;
  retired_.clear();
}

absl::Status ReminderService::Validate(absl::string_view name,
                                       absl::Duration due,
                                       absl::Duration period) const {
  if (name.empty()) {
    return absl::InvalidArgumentError("a reminder needs a name");
  }
  if (name.size() > kMaxReminderNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the reminder name is ", name.size(), " bytes; at most ",
                     kMaxReminderNameBytes, " are allowed"));
  }
  if (due < absl::ZeroDuration() || due == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reminder '", name, "': due time ", absl::FormatDuration(due),
        " must be finite and not negative"));
  }
  if (period < min_period_ || period <= absl::ZeroDuration() ||
      period == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reminder '", name, "': period ", absl::FormatDuration(period),
        " is below this silo's minimum of ", absl::FormatDuration(min_period_),
        " (or infinite)"));
  }
  return absl::OkStatus();
}

void ReminderService::SetRanges(std::function<bool(const GrainId&)> owns,
                                absl::Duration refresh) {
  owns_ = std::move(owns);
  refresh_ = refresh;
  refresh_timer_ = std::make_unique<RefreshTimer>();
  refresh_timer_->service = this;
}

bool ReminderService::Forwards(const GrainId& grain) const {
  if (keeper_ == nullptr) return false;
  if (!owns_) return true;
  MutexLock lock(&mu_);
  return !owns_(grain);
}

absl::Status ReminderService::Start() {
  if (keeper_ != nullptr && !owns_) {
    MutexLock lock(&mu_);
    running_ = true;
    GRANARY_LOG(kInfo) << "silo=" << silo_->name()
                       << " reminders are kept by the cluster's primary";
    return absl::OkStatus();
  }
  // Runtime::Start is synchronous (its caller's thread, never a worker's):
  // the edge where the load is awaited.
  absl::StatusOr<absl::Status> loaded = Load().Get();
  if (loaded.ok() && loaded->ok() && refresh_timer_ != nullptr) {
    silo_->internals().timers().Schedule(refresh_timer_.get(),
                                         silo_->clock()->Now() + refresh_);
  }
  return loaded.ok() ? *loaded : loaded.status();
}

Task<absl::Status> ReminderService::Load() {
  absl::StatusOr<std::vector<storage::ReminderRow>> rows =
      co_await table_->ReadAll();
  if (!rows.ok()) {
    co_return absl::Status(
        rows.status().code(),
        absl::StrCat("cannot load reminders: ", rows.status().message()));
  }
  MutexLock lock(&mu_);
  running_ = true;
  for (storage::ReminderRow& row : *rows) {
    if (owns_ && !owns_(row.grain)) continue;  // another silo's range
    if (row.period <= absl::ZeroDuration()) {
      GRANARY_LOG(kError) << "grain=" << LogQuote(row.grain.ToString())
                          << " reminder=" << LogQuote(row.name)
                          << " skipping a stored reminder with period "
                          << absl::FormatDuration(row.period);
      continue;
    }
    Install(NewLocal(std::move(row)));
  }
  GRANARY_LOG(kInfo) << "silo=" << silo_->name()
                     << " reminders=" << live_.size() << " reminders loaded";
  co_return absl::OkStatus();
}

void ReminderService::Stop() {
  if (refresh_timer_ != nullptr)
    (void)silo_->internals().timers().Cancel(refresh_timer_.get());
  MutexLock lock(&mu_);
  running_ = false;
  for (auto& [key, r] : live_) (void)silo_->internals().timers().Cancel(r);
}

absl::Time ReminderService::NextDue(const Local& r, absl::Time after) const {
  const absl::Time from = std::max(after, silo_->clock()->Now());
  if (from < r.first_tick) return r.first_tick;
  absl::Duration rem;
  const int64_t k = absl::IDivDuration(from - r.first_tick, r.period, &rem);
  absl::Time next = r.first_tick + r.period * k;
  if (next <= after || next < from) next += r.period;
  return next;
}

std::unique_ptr<ReminderService::Local> ReminderService::NewLocal(
    storage::ReminderRow row) {
  auto r = std::make_unique<Local>();
  r->service = this;
  r->grain = std::move(row.grain);
  r->name = std::move(row.name);
  r->first_tick = row.start;
  r->period = row.period;
  return r;
}

void ReminderService::Install(std::unique_ptr<Local> r) {
  Key key(r->grain, r->name);
  auto it = live_.find(key);
  if (it != live_.end()) {
    Retire(it->second);
    EraseLive(it);
  }
  Local* raw = r.release();
  raw->seq = ++changes_;
  ++per_grain_[raw->grain];
  live_.emplace(std::move(key), raw);
  if (running_) {
    raw->due = NextDue(*raw, absl::InfinitePast());
    silo_->internals().timers().Schedule(raw, raw->due);
  }
}

ReminderService::LiveMap::iterator ReminderService::EraseLive(
    LiveMap::iterator it) {
  auto count = per_grain_.find(it->first.first);
  if (count != per_grain_.end() && --count->second <= 0)
    per_grain_.erase(count);
  auto next = std::next(it);
  live_.erase(it);
  return next;
}

absl::Status ReminderService::CheckQuotas(const Key& key) const {
  if (live_.contains(key)) return absl::OkStatus();  // replaced: no room taken
  auto count = per_grain_.find(key.first);
  if (count != per_grain_.end() && count->second >= quotas_.per_grain) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "grain ", absl::CHexEscape(key.first.ToString().substr(0, 256)),
        " has ", count->second,
        " reminders, its quota (--max_reminders_per_grain): unregister one "
        "first, or reuse a name"));
  }
  if (static_cast<int64_t>(live_.size()) >= quotas_.per_silo) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this silo schedules ", live_.size(),
                     " reminders, its quota (--max_reminders)"));
  }
  return absl::OkStatus();
}

void ReminderService::Retire(Local* r) {
  if (silo_->internals().timers().Cancel(r)) {
    delete r;  // was queued: nobody else holds it
    return;
  }
  // Firing (Fire frees it), in flight (TickDone frees it) or idle because
  // the service stopped (freed with the service).
  r->retired = true;
  retired_.insert(r);
}

Task<absl::StatusOr<absl::Time>> ReminderService::Register(
    GrainId grain, std::string name, absl::Duration due,
    absl::Duration period) {
  if (absl::Status valid = Validate(name, due, period); !valid.ok()) {
    co_return valid;
  }
  if (Forwards(grain)) {
    co_return co_await keeper_->Register(std::move(grain), std::move(name), due,
                                         period);
  }
  co_return co_await RegisterHere(std::move(grain), std::move(name), due,
                                  period);
}

Task<absl::StatusOr<absl::Time>> ReminderService::RegisterHere(
    GrainId grain, std::string name, absl::Duration due,
    absl::Duration period) {
  if (absl::Status valid = Validate(name, due, period); !valid.ok()) {
    co_return valid;
  }
  if (!owns_ || owns_(grain)) {
    // Checked before the write; registers in flight at once may each pass.
    MutexLock lock(&mu_);
    if (absl::Status room = CheckQuotas(Key(grain, name)); !room.ok()) {
      co_return room;
    }
  }
  storage::ReminderRow row;
  row.grain = std::move(grain);
  row.name = std::move(name);
  // In whole microseconds, as the wire and the stores keep it: a tick of
  // this reminder is matched by its first tick wherever it is sent from.
  row.start =
      absl::FromUnixMicros(absl::ToUnixMicros(silo_->clock()->Now() + due));
  row.period = absl::Microseconds(absl::ToInt64Microseconds(period));
  // The table may finish after the silo (and this service) stopped: past
  // the await, `this` is touched only while the gate is open.
  const std::shared_ptr<SiloGate> gate = silo_->internals().gate();
  absl::Status stored = co_await table_->Upsert(row);
  if (!stored.ok()) co_return stored;
  gate->RunIfOpen([&] {
    MutexLock lock(&mu_);
    // With ranges, the owner schedules it (a later Rebalance, if that is
    // another silo by now).
    if (!owns_ || owns_(row.grain)) Install(NewLocal(row));
  });
  co_return row.start;
}

Task<absl::StatusOr<bool>> ReminderService::Unregister(GrainId grain,
                                                       std::string name) {
  if (Forwards(grain)) {
    co_return co_await keeper_->Unregister(std::move(grain), std::move(name));
  }
  co_return co_await UnregisterHere(std::move(grain), std::move(name));
}

Task<absl::StatusOr<bool>> ReminderService::UnregisterHere(GrainId grain,
                                                           std::string name) {
  const std::shared_ptr<SiloGate> gate =
      silo_->internals().gate();  // as in Register
  absl::Status removed = co_await table_->Remove(grain, name);
  if (!removed.ok()) co_return removed;
  bool existed = false;
  gate->RunIfOpen([&] {
    MutexLock lock(&mu_);
    // A reload that read the table before the removal must not bring it
    // back (only reloads, with ranges, look at this).
    if (owns_) removed_[Key(grain, name)] = ++changes_;
    auto it = live_.find(Key(grain, name));
    if (it != live_.end()) {
      existed = true;
      Retire(it->second);
      EraseLive(it);
    }
  });
  co_return existed;
}

void ReminderService::Rebalance() {
  if (!owns_) return;
  Detach(Reload(), [](absl::Status) {});
}

Task<void> ReminderService::Reload() {
  uint64_t reload, installed_before;
  {
    MutexLock lock(&mu_);
    if (!running_) co_return;
    reload = ++reloads_;
    installed_before = changes_;
  }
  // The table may answer after the silo stopped: as in Register.
  const std::shared_ptr<SiloGate> gate = silo_->internals().gate();
  absl::StatusOr<std::vector<storage::ReminderRow>> rows =
      co_await table_->ReadAll();
  if (!rows.ok()) {
    GRANARY_LOG(kWarning) << "silo=" << silo_->name()
                          << " cannot read the reminders of its range: "
                          << rows.status() << " (tried again on the next "
                          << "view change or refresh)";
    co_return;
  }
  gate->RunIfOpen([&] {
    MutexLock lock(&mu_);
    if (!running_ || reload != reloads_) return;  // a newer one applies
    absl::flat_hash_set<Key> in_table;
    int gained = 0, lost = 0;
    for (storage::ReminderRow& row : *rows) {
      if (!owns_(row.grain) || row.period <= absl::ZeroDuration()) continue;
      Key key(row.grain, row.name);
      in_table.insert(key);
      auto it = live_.find(key);
      if (it != live_.end() && (it->second->seq > installed_before ||
                                (it->second->first_tick == row.start &&
                                 it->second->period == row.period))) {
        // Registered again after the read, or scheduled already as read:
        // its next tick stays as it is.
        continue;
      }
      auto gone = removed_.find(key);
      if (gone != removed_.end() && gone->second > installed_before) {
        continue;  // unregistered after the read
      }
      Install(NewLocal(std::move(row)));
      ++gained;
    }
    for (auto it = live_.begin(); it != live_.end();) {
      Local* r = it->second;
      // Not ours any more, or removed from the table (unless installed
      // after this reload read it).
      if (!owns_(r->grain) ||
          (!in_table.contains(it->first) && r->seq <= installed_before)) {
        Retire(r);
        it = EraseLive(it);
        ++lost;
      } else {
        ++it;
      }
    }
    removed_.clear();
    if (gained != 0 || lost != 0) {
      GRANARY_LOG(kInfo) << "silo=" << silo_->name() << " reminders=+" << gained
                         << "/-" << lost
                         << " the range's reminders rebalanced; "
                         << live_.size() << " scheduled here";
    }
  });
}

void ReminderService::Fire(Local* r) {
  ReminderCall* call;
  {
    MutexLock lock(&mu_);
    if (r->retired) {  // removed while firing
      retired_.erase(r);
      delete r;
      return;
    }
    if (!running_) return;  // stays in live_, freed with the service
    r->in_flight = true;
    ++ticks_sent_;
    call = new ReminderCall(
        r->grain, ReminderTick{r->name, r->first_tick, r->period, r->due}, r);
  }
  call->set_request_context(RootContext());
  // No deadline: the tick finishes when the grain's turn does, so the next
  // one is scheduled only then (ticks never overlap) and `r` stays alive
  // while the call is anywhere (StartReminderTick reads it).
  call->set_timeout(absl::InfiniteDuration());
  call->SetDoneCallback(&ReminderService::TickDone, r);
  silo_->internals().InvokeReminder(call);
}

void ReminderService::TickDone(void* ctx, CallBase* call) {
  auto* r = static_cast<Local*>(ctx);
  ReminderService* self = r->service;
  const absl::Status& status = call->status();
  MutexLock lock(&self->mu_);
  r->in_flight = false;
  ++(status.ok() ? self->ticks_ok_ : self->ticks_failed_);
  if (r->retired) {
    self->retired_.erase(r);
    delete r;
    return;
  }
  if (!status.ok() && !r->failing) {
    GRANARY_LOG(kWarning) << "grain=" << LogQuote(r->grain.ToString())
                          << " reminder=" << LogQuote(r->name)
                          << " tick failed: " << status
                          << " (logged once until a tick succeeds)";
  }
  r->failing = !status.ok();
  if (!self->running_) return;
  r->due = self->NextDue(*r, r->due);
  self->silo_->internals().timers().Schedule(r, r->due);
}

bool ReminderService::IsCurrent(const ReminderCall& tick) const {
  MutexLock lock(&mu_);
  return !static_cast<const Local*>(tick.reminder())->retired;
}

Task<absl::StatusOr<std::vector<ReminderTick>>> ReminderService::List(
    GrainId grain) const {
  if (Forwards(grain)) co_return co_await keeper_->List(std::move(grain));
  co_return ListHere(grain);
}

std::vector<ReminderTick> ReminderService::ListHere(
    const GrainId& grain) const {
  std::vector<ReminderTick> out;
  MutexLock lock(&mu_);
  for (const auto& [key, r] : live_) {
    if (key.first == grain) {
      out.push_back(ReminderTick{r->name, r->first_tick, r->period, r->due});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ReminderTick& a, const ReminderTick& b) {
              return a.name < b.name;
            });
  return out;
}

size_t ReminderService::size() const {
  MutexLock lock(&mu_);
  return live_.size();
}

uint64_t ReminderService::ticks_sent() const {
  MutexLock lock(&mu_);
  return ticks_sent_;
}

uint64_t ReminderService::ticks_ok() const {
  MutexLock lock(&mu_);
  return ticks_ok_;
}

uint64_t ReminderService::ticks_failed() const {
  MutexLock lock(&mu_);
  return ticks_failed_;
}

}  // namespace granary::silo
