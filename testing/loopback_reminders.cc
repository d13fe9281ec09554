#include "testing/loopback_reminders.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "silo/runtime/runtime.h"

namespace granary::testing {

LoopbackReminders::LoopbackReminders(
    LoopbackNetwork* network, std::string self_id,
    std::function<std::string(const GrainId&)> owner)
    : network_(network),
      self_id_(std::move(self_id)),
      owner_(std::move(owner)) {}

absl::StatusOr<silo::ReminderService*> LoopbackReminders::To(
    const GrainId& grain) const {
  const std::string address = owner_(grain);
  if (address.empty()) {
    return absl::UnavailableError(absl::StrCat("no silo owns the reminders of ",
                                               grain.ToString(), " yet"));
  }
  silo::Runtime* owner = network_->Reach(self_id_, address);
  if (owner == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("the reminders' owner ", address, " is not reachable"));
  }
  return &owner->internals().reminders();
}

Task<absl::StatusOr<absl::Time>> LoopbackReminders::Register(
    GrainId grain, std::string name, absl::Duration due,
    absl::Duration period) {
  absl::StatusOr<silo::ReminderService*> to = To(grain);
  if (!to.ok()) co_return to.status();
  co_return co_await (*to)->RegisterHere(std::move(grain), std::move(name), due,
                                         period);
}

Task<absl::StatusOr<bool>> LoopbackReminders::Unregister(GrainId grain,
                                                         std::string name) {
  absl::StatusOr<silo::ReminderService*> to = To(grain);
  if (!to.ok()) co_return to.status();
  co_return co_await (*to)->UnregisterHere(std::move(grain), std::move(name));
}

Task<absl::StatusOr<std::vector<ReminderTick>>> LoopbackReminders::List(
    GrainId grain) {
  absl::StatusOr<silo::ReminderService*> to = To(grain);
  if (!to.ok()) co_return to.status();
  co_return (*to)->ListHere(grain);
}

}  // namespace granary::testing
