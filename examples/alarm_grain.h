// File: examples/alarm_grain.h
// -----------------------------------------------------------------------------
// granary.examples.Alarm: the example of durable reminders
// (RegisterReminder / ReceiveReminder, silo/runtime/grain.h) together with
// persistent state.
//
//   silo.AddGrain<AlarmGrain>();
#pragma once

#include "examples/alarm.grain.h"

namespace granary::examples {

class AlarmGrain final : public AlarmGrainBase {
 public:
  AlarmGrain() { PersistState(&record_); }

  Task<AlarmState> Set(const SetAlarmRequest& request) override;
  Task<AlarmState> Cancel(const CancelAlarmRequest& request) override;
  Task<AlarmState> Get(const GetAlarmRequest& request) override;
  Task<void> ReceiveReminder(const ReminderTick& tick) override;

 private:
  // The alarms (ticks counted and reminders registered) of this grain.
  Task<AlarmState> Current() const;

  AlarmRecord record_;
};

}  // namespace granary::examples
