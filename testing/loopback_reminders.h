// File: testing/loopback_reminders.h
// -----------------------------------------------------------------------------
// Reminders in an in-process cluster (testing/in_process_cluster.h), as a
// PostgreSQL cluster keeps them: each silo schedules the reminders of its
// range of the ring, and a silo hands its grains' Register, Unregister and
// List to the silo that owns the grain's range. Between processes that
// request goes over gRPC (silo/cluster/reminder_remote.h, RangeReminders);
// here LoopbackReminders hands it to the owner's ReminderService through
// the LoopbackNetwork, which refuses it over a link with a fault.
//
//   env.in_process->reminders = [&net, id](auto owner) {
//     return std::make_unique<LoopbackReminders>(&net, id, std::move(owner));
//   };
//
// Threading: thread-safe; a task resumes its awaiter on the owner's thread
// that finishes the request.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/grain_id.h"
#include "core/task.h"
#include "silo/runtime/reminder_service.h"
#include "testing/loopback_transport.h"

namespace granary::testing {

class LoopbackReminders final : public silo::ReminderKeeper {
 public:
  // `owner(grain)`: the address (HOST:PORT) of the silo that owns the
  // grain's range; empty when none does.
  LoopbackReminders(LoopbackNetwork* network, std::string self_id,
                    std::function<std::string(const GrainId&)> owner);

  Task<absl::StatusOr<absl::Time>> Register(GrainId grain, std::string name,
                                            absl::Duration due,
                                            absl::Duration period) override;
  Task<absl::StatusOr<bool>> Unregister(GrainId grain,
                                        std::string name) override;
  Task<absl::StatusOr<std::vector<ReminderTick>>> List(GrainId grain) override;

 private:
  // The owner's reminder service, or UNAVAILABLE when no silo owns the
  // range, or the owner is not attached or not reachable from here.
  absl::StatusOr<silo::ReminderService*> To(const GrainId& grain) const;

  LoopbackNetwork* const network_;
  const std::string self_id_;
  const std::function<std::string(const GrainId&)> owner_;
};

}  // namespace granary::testing
