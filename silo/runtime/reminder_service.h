// File: silo/runtime/reminder_service.h
// -----------------------------------------------------------------------------
// Durable reminders: periodic triggers that outlive activations and silo
// restarts. Rows live in a storage::ReminderTable; this service keeps the
// schedule of every row in memory, and when a tick is due sends the grain a
// reminder call (a request like any other, so an inactive grain is activated
// for it) that runs the grain's ReceiveReminder hook as a turn.
//
//   ReminderService reminders(&silo, &table, absl::Seconds(1));
//   reminders.Start();                  // loads and schedules every row
//   absl::StatusOr<absl::Time> first = co_await reminders.Register(
//       grain, "tick", absl::Seconds(5), absl::Minutes(1));
//   reminders.Stop();                   // no tick is sent after this
//
// Ticks are due at first_tick + k * period. The next tick is scheduled when
// the previous one finished (ticks of one reminder never overlap); ticks
// missed meanwhile, or while no silo ran, are skipped rather than replayed.
//
// In a dev cluster only the primary keeps the table and schedules
// reminders: the other silos hand their grains' Register, Unregister and
// List to it (SetKeeper, silo/cluster/reminder_remote.h), and the primary's
// ticks go wherever the grain lives, like any call (as ReminderTickMessage
// requests between silos). A silo's death therefore stops no reminder.
//
// In a production cluster (--cluster=postgres) the table is shared and no
// silo is special: each silo schedules the reminders whose grain falls in
// its range of the directory ring (SetRanges). Register, Unregister and
// List of a grain whose range another silo owns go to that silo (the
// keeper then forwards by range); when the view changes, Rebalance reads
// the table again, retires what this silo no longer owns and schedules
// what it gained, so a dead silo's reminders tick again from their new
// owner once its death is in the view. Two silos may both believe they own
// a range for the moment one learns a view before the other: the grain's
// activation drops a tick whose due time is not after the last it ran
// (silo/runtime/activation.cc), so no due time ticks twice.
//
// Register, Unregister and List are lazy Tasks like the table's (storage/
// reminder_table.h): an awaiter resumes on the table's thread (or gRPC's,
// or inline), so grain code reaches them only through the runtime, which
// posts the result to the activation (silo/runtime/grain.cc).
//
// Threading: every method is thread-safe; ticks are sent from the silo's
// timer thread.
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
#include "core/task.h"
#include "core/timer_queue.h"
#include "google/protobuf/empty.pb.h"
#include "granary/v1/reminders.pb.h"
#include "silo/runtime/grain.h"
#include "storage/reminder_table.h"

namespace granary::silo {

class Runtime;

// The longest name a reminder may have, in bytes.
inline constexpr size_t kMaxReminderNameBytes = 256;

// The call that carries one tick to a grain (method kReminderMethod). Its
// request is the tick as a v1::ReminderTickMessage, which is what a silo
// sends when the grain lives on another silo.
class ReminderCall final : public CallBase {
 public:
  ReminderCall(GrainId target, ReminderTick tick, const void* reminder);
  google::protobuf::Message& request() override { return request_; }
  google::protobuf::Message& reply() override { return reply_; }
  const ReminderTick& tick() const { return tick_; }
  // The schedule entry that sent it (ReminderService::IsCurrent); null for
  // a tick another silo sent.
  const void* reminder() const { return reminder_; }

 private:
  v1::ReminderTickMessage request_;
  google::protobuf::Empty reply_;
  ReminderTick tick_;
  const void* reminder_;
};

// A tick as it travels between silos, and back.
void ToTickMessage(const ReminderTick& t, v1::ReminderTickMessage* m);
ReminderTick FromTickMessage(const v1::ReminderTickMessage& m);

// A tick another silo sent (the grain's type `iface`, its `key`, the
// serialized v1::ReminderTickMessage): INVALID_ARGUMENT when it does not
// decode, has no name or an overlong one, or a period that is not positive.
absl::StatusOr<CallBase*> ReminderCallFromWire(const InterfaceInfo& iface,
                                               std::string key,
                                               const std::string& payload);

// The silo that keeps and schedules the reminders when this one does not
// (silo/cluster/reminder_remote.h). The tasks resume their awaiter on any
// thread and report failures as statuses.
class ReminderKeeper {
 public:
  virtual ~ReminderKeeper() = default;
  // When the first tick is due.
  virtual Task<absl::StatusOr<absl::Time>> Register(GrainId grain,
                                                    std::string name,
                                                    absl::Duration due,
                                                    absl::Duration period) = 0;
  // Whether there was such a reminder.
  virtual Task<absl::StatusOr<bool>> Unregister(GrainId grain,
                                                std::string name) = 0;
  virtual Task<absl::StatusOr<std::vector<ReminderTick>>> List(
      GrainId grain) = 0;
};

// How many reminders the schedule takes (RESOURCE_EXHAUSTED past them): of
// one grain, and of the whole silo. Registering a name again replaces it
// and needs no room.
struct ReminderQuotas {
  int per_grain = 64;
  int64_t per_silo = 100'000;
};

class ReminderService {
 public:
  // `table` must outlive the service; periods shorter than `min_period` are
  // refused.
  ReminderService(Runtime* silo, storage::ReminderTable* table,
                  absl::Duration min_period, ReminderQuotas quotas = {});
  ~ReminderService();
  ReminderService(const ReminderService&) = delete;
  ReminderService& operator=(const ReminderService&) = delete;

  // Hands every request to `keeper` instead of this silo's table and
  // schedule (which Start then leaves unread). Before Start; `keeper` must
  // outlive the service.
  void SetKeeper(ReminderKeeper* keeper) { keeper_ = keeper; }
  bool has_keeper() const { return keeper_ != nullptr; }
  // Schedules only the reminders of grains `owns` says are this silo's;
  // requests for other grains go to the keeper. `owns` is called with the
  // service's lock held and must not call back into it. Before Start.
  void SetRanges(std::function<bool(const GrainId&)> owns,
                 absl::Duration refresh = absl::Seconds(30));
  // With ranges: reads the table again (now, in the background) and
  // schedules exactly the rows this silo owns. Called on every view
  // change, and every `refresh` (a backstop for rows written while two
  // silos disagreed about a range).
  void Rebalance();

  // Reads every row from the table and schedules it (awaiting Load on the
  // caller's thread: never call it from a worker); fails when the table
  // cannot be read. With a keeper it reads nothing.
  absl::Status Start();
  // The awaitable load that Start runs: every row read and scheduled.
  Task<absl::Status> Load();
  // Sends no tick after this; ticks in flight finish on their own.
  void Stop();

  // INVALID_ARGUMENT for an empty or overlong name, a negative or infinite
  // `due`, a period below the minimum or infinite.
  absl::Status Validate(absl::string_view name, absl::Duration due,
                        absl::Duration period) const;
  // Makes the reminder durable (replacing one of the same name), then
  // schedules its first tick `due` from now. The outcome: when the first
  // tick is due. RESOURCE_EXHAUSTED, with nothing written, when a new name
  // would take the grain or the silo past its quota (ReminderQuotas; the
  // silo that schedules the grain's reminders counts them).
  Task<absl::StatusOr<absl::Time>> Register(GrainId grain, std::string name,
                                            absl::Duration due,
                                            absl::Duration period);
  // Removes the reminder from the table and the schedule; whether there was
  // one.
  Task<absl::StatusOr<bool>> Unregister(GrainId grain, std::string name);
  // The same on this silo's table and schedule, never handed to a keeper
  // (what a silo serves to the others: silo/cluster/reminder_remote.h).
  Task<absl::StatusOr<absl::Time>> RegisterHere(GrainId grain, std::string name,
                                                absl::Duration due,
                                                absl::Duration period);
  Task<absl::StatusOr<bool>> UnregisterHere(GrainId grain, std::string name);
  // False when the reminder that sent `tick` was removed or replaced since:
  // the tick is then dropped instead of run.
  bool IsCurrent(const ReminderCall& tick) const;
  // The reminders of `grain`, by name, with the next tick as current_tick.
  Task<absl::StatusOr<std::vector<ReminderTick>>> List(GrainId grain) const;
  // The same from this silo's own schedule.
  std::vector<ReminderTick> ListHere(const GrainId& grain) const;

  size_t size() const;
  absl::Duration min_period() const { return min_period_; }
  // Ticks sent; ticks finished, ok or failed (grain error, no such type).
  uint64_t ticks_sent() const;
  uint64_t ticks_ok() const;
  uint64_t ticks_failed() const;

 private:
  struct Local;
  using Key = std::pair<GrainId, std::string>;

  struct RefreshTimer;
  // Whether requests for `grain` go to the keeper.
  bool Forwards(const GrainId& grain) const;
  Task<void> Reload();
  void Fire(Local* r);
  static void TickDone(void* ctx, CallBase* call);
  // A schedule entry for `row` (not yet installed).
  std::unique_ptr<Local> NewLocal(storage::ReminderRow row);
  // Puts `r` in the schedule, retiring the reminder it replaces.
  void Install(std::unique_ptr<Local> r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Erases `it` from live_ (the caller retires its reminder) and returns
  // the next entry.
  using LiveMap = absl::flat_hash_map<Key, Local*>;
  LiveMap::iterator EraseLive(LiveMap::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK, or RESOURCE_EXHAUSTED when a reminder `key` would take its grain or
  // the silo past the quotas.
  absl::Status CheckQuotas(const Key& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `r` out of the schedule: freed now when queued, else by whoever
  // holds its tick in flight.
  void Retire(Local* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first due time strictly after `after` (and not before now).
  absl::Time NextDue(const Local& r, absl::Time after) const;

  Runtime* const silo_;
  storage::ReminderTable* const table_;
  const absl::Duration min_period_;
  const ReminderQuotas quotas_;
  ReminderKeeper* keeper_ = nullptr;
  std::function<bool(const GrainId&)> owns_;  // set before Start
  absl::Duration refresh_ = absl::Seconds(30);
  std::unique_ptr<RefreshTimer> refresh_timer_;

  mutable Mutex mu_;
  LiveMap live_ ABSL_GUARDED_BY(mu_);
  // Reminders in live_ per grain (for ReminderQuotas::per_grain).
  absl::flat_hash_map<GrainId, int> per_grain_ ABSL_GUARDED_BY(mu_);
  // Replaced or removed while a tick was in flight; freed when it returns.
  absl::flat_hash_set<Local*> retired_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  // Reloads started; only the latest one's rows are applied.
  uint64_t reloads_ ABSL_GUARDED_BY(mu_) = 0;
  // Installs and removals so far (a logical clock). A reload applies what
  // it read only to reminders that did not change after it began: it
  // neither retires nor replaces one installed later, nor brings back one
  // removed later (`removed_`: key -> when; cleared by each applied
  // reload, since any later reload begins after every entry in it).
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<Key, uint64_t> removed_ ABSL_GUARDED_BY(mu_);
  uint64_t ticks_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ticks_ok_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ticks_failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace granary::silo
