// File: silo/reminder_service.h
// -----------------------------------------------------------------------------
// Durable reminders: periodic triggers that outlive activations and silo
// restarts. Rows live in a storage::ReminderTable; this service keeps the
// schedule of every row in memory, and when a tick is due sends the grain a
// reminder call (a request like any other, so an inactive grain is activated
// for it) that runs the grain's ReceiveReminder hook as a turn.
//
//   ReminderService reminders(&silo, &table, absl::Seconds(1));
//   reminders.Start();                  // loads and schedules every row
//   reminders.Register(grain, "tick", absl::Seconds(5), absl::Minutes(1), done);
//   reminders.Stop();                   // no tick is sent after this
//
// Ticks are due at first_tick + k * period. The next tick is scheduled when
// the previous one finished (ticks of one reminder never overlap); ticks
// missed meanwhile, or while no silo ran, are skipped rather than replayed.
//
// Threading: every method is thread-safe. Completions run on the table's
// thread; ticks are sent from the silo's timer thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "core/sync.h"
#include "core/timer_queue.h"
#include "google/protobuf/empty.pb.h"
#include "silo/grain.h"
#include "storage/reminder_table.h"

namespace granary::silo {

class Silo;

// The longest name a reminder may have, in bytes.
inline constexpr size_t kMaxReminderNameBytes = 256;

// The call that carries one tick to a grain (method kReminderMethod).
class ReminderCall final : public CallBase {
 public:
  ReminderCall(GrainId target, ReminderTick tick, const void* reminder)
      : CallBase(std::move(target), kReminderMethod, /*one_way=*/false),
        tick_(std::move(tick)),
        reminder_(reminder) {}
  google::protobuf::Message& request() override { return request_; }
  google::protobuf::Message& reply() override { return reply_; }
  const ReminderTick& tick() const { return tick_; }
  // The schedule entry that sent it (ReminderService::IsCurrent).
  const void* reminder() const { return reminder_; }

 private:
  google::protobuf::Empty request_;
  google::protobuf::Empty reply_;
  ReminderTick tick_;
  const void* reminder_;
};

class ReminderService {
 public:
  // `table` must outlive the service; periods shorter than `min_period` are
  // refused.
  ReminderService(Silo* silo, storage::ReminderTable* table,
                  absl::Duration min_period);
  ~ReminderService();
  ReminderService(const ReminderService&) = delete;
  ReminderService& operator=(const ReminderService&) = delete;

  // Reads every row from the table and schedules it; fails when the table
  // cannot be read within `timeout`. Call after the silo's timers started.
  absl::Status Start(absl::Duration timeout = absl::Seconds(30));
  // Sends no tick after this; ticks in flight finish on their own.
  void Stop();

  // INVALID_ARGUMENT for an empty or overlong name, a negative or infinite
  // `due`, a period below the minimum or infinite.
  absl::Status Validate(absl::string_view name, absl::Duration due,
                        absl::Duration period) const;
  // Makes the reminder durable (replacing one of the same name), then
  // schedules its first tick `due` from now. `done` gets the outcome.
  void Register(const GrainId& grain, std::string name, absl::Duration due,
                absl::Duration period, std::function<void(absl::Status)> done);
  // Removes the reminder from the table and the schedule; `done` gets
  // whether there was one.
  void Unregister(const GrainId& grain, std::string name,
                  std::function<void(absl::StatusOr<bool>)> done);
  // False when the reminder that sent `tick` was removed or replaced since:
  // the tick is then dropped instead of run.
  bool IsCurrent(const ReminderCall& tick) const;
  // The reminders of `grain`, with the next tick as current_tick.
  std::vector<ReminderTick> List(const GrainId& grain) const;

  size_t size() const;
  absl::Duration min_period() const { return min_period_; }
  // Ticks sent; ticks finished, ok or failed (grain error, no such type).
  uint64_t ticks_sent() const;
  uint64_t ticks_ok() const;
  uint64_t ticks_failed() const;

 private:
  struct Local;
  using Key = std::pair<GrainId, std::string>;

  void Fire(Local* r);
  static void TickDone(void* ctx, CallBase* call);
  // Puts `r` in the schedule, retiring the reminder it replaces.
  void Install(std::unique_ptr<Local> r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `r` out of the schedule: freed now when queued, else by whoever
  // holds its tick in flight.
  void Retire(Local* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first due time strictly after `after` (and not before now).
  absl::Time NextDue(const Local& r, absl::Time after) const;

  Silo* const silo_;
  storage::ReminderTable* const table_;
  const absl::Duration min_period_;

  mutable Mutex mu_;
  absl::flat_hash_map<Key, Local*> live_ ABSL_GUARDED_BY(mu_);
  // Replaced or removed while a tick was in flight; freed when it returns.
  absl::flat_hash_set<Local*> retired_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t ticks_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ticks_ok_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ticks_failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace granary::silo
