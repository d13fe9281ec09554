// Runtime (silo/runtime/runtime.h): the grain types a silo hosts and those
// it only knows (--grain_types), and the calls it could not decode
// (core/opaque_call.h), which it never runs: the router places them on a
// silo that has their type or method (docs/upgrades.md).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/opaque_call.h"
#include "silo/runtime/activation.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

std::vector<const GrainClassInfo*> Runtime::KnownTypes() const {
  std::vector<const GrainClassInfo*> out;
  for (const auto& [name, entry] : types_) out.push_back(entry->info);
  return out;
}

absl::Status Runtime::HostOnly(const std::vector<std::string>& types) {
  if (state_.load() != State::kNew) {
    return absl::FailedPreconditionError(
        "the hosted grain types are chosen before the silo starts");
  }
  if (types.empty()) return absl::OkStatus();  // all of them
  absl::flat_hash_set<absl::string_view> wanted;
  for (const std::string& t : types) {
    if (!types_.contains(t)) {
      std::vector<absl::string_view> known;
      for (const auto& [name, entry] : types_) known.push_back(name);
      std::sort(known.begin(), known.end());
      return absl::InvalidArgumentError(
          absl::StrCat("--grain_types names ", t,
                       ", which this silo was not built with (it has: ",
                       absl::StrJoin(known, ", "), ")"));
    }
    wanted.insert(t);
  }
  for (auto& [name, entry] : types_) entry->hosted = wanted.contains(name);
  return absl::OkStatus();
}

void Runtime::InvokeOpaque(CallBase* call, const GrainTypeEntry* type) {
  const OpaqueCall* opaque = static_cast<const OpaqueCall*>(call);
  absl::Status refused;
  if (router_ == nullptr) {
    refused = absl::UnimplementedError(
        absl::StrCat("unknown grain method ", opaque->method_path(), " (silo ",
                     options_.name, " hosts no such type or method)"));
  } else if (type != nullptr &&
             !router_->LaterVersionHosted(call->target().type(),
                                          type->info->interface->version)) {
    // Known here, and no silo has a later version: a method no release
    // has, not one of an upgrade under way.
    refused = absl::UnimplementedError(
        absl::StrCat("grain type ", call->target().type(), " has no method ",
                     opaque->method_name()));
  } else if (state_.load(std::memory_order_acquire) == State::kNew) {
    refused = absl::UnavailableError(
        absl::StrCat("silo ", options_.name, " is not running"));
  }
  if (!refused.ok()) {
    call->Fail(std::move(refused));
    call->Release();
    return;
  }
  // Never run here: the router places it on a silo that knows the method
  // (moving the grain's activation off this silo when it lives here).
  ArmDeadline(call);
  router_->Route(call);
}

bool Runtime::HostsType(absl::string_view type) const {
  const GrainTypeEntry* t = FindType(type);
  return t != nullptr && t->hosted;
}

}  // namespace granary::silo
