#include "examples/alarm_grain.h"

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace granary::examples {

Task<AlarmState> AlarmGrain::Current() const {
  std::map<std::string, AlarmInfo> by_name;
  for (const auto& [name, ticks] : record_.ticks()) {
    AlarmInfo& info = by_name[name];
    info.set_name(name);
    info.set_ticks(ticks.ticks());
    info.set_last_tick_unix_ms(ticks.last_tick_unix_ms());
  }
  const std::vector<ReminderTick> reminders = co_await GetReminders();
  for (const ReminderTick& r : reminders) {
    AlarmInfo& info = by_name[r.name];
    info.set_name(r.name);
    info.set_period_ms(absl::ToInt64Milliseconds(r.period));
    info.set_next_tick_unix_ms(absl::ToUnixMillis(r.current_tick));
  }
  AlarmState state;
  for (auto& [name, info] : by_name) *state.add_alarms() = std::move(info);
  state.set_silo(SiloName());
  state.set_activation_id(ActivationId());
  co_return state;
}

Task<AlarmState> AlarmGrain::Set(const SetAlarmRequest& request) {
  co_await RegisterReminder(request.name(),
                            absl::Milliseconds(request.due_ms()),
                            absl::Milliseconds(request.period_ms()));
  AlarmState state = co_await Current();
  co_return state;
}

Task<AlarmState> AlarmGrain::Cancel(const CancelAlarmRequest& request) {
  const bool removed = co_await UnregisterReminder(request.name());
  if (!removed) {
    throw StatusError(absl::NotFoundError(
        absl::StrCat("no alarm named '", request.name(), "'")));
  }
  AlarmState state = co_await Current();
  co_return state;
}

Task<AlarmState> AlarmGrain::Get(const GetAlarmRequest&) {
  AlarmState state = co_await Current();
  co_return state;
}

Task<void> AlarmGrain::ReceiveReminder(const ReminderTick& tick) {
  AlarmTicks& ticks = (*record_.mutable_ticks())[tick.name];
  ticks.set_ticks(ticks.ticks() + 1);
  ticks.set_last_tick_unix_ms(absl::ToUnixMillis(Now()));
  co_await WriteState();
}

}  // namespace granary::examples
