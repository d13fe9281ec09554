#include "core/grain_id.h"

#include <memory>

#include "absl/container/node_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/sync.h"

namespace granary {

absl::string_view InternTypeName(absl::string_view name) {
  return InternString(name);
}

absl::string_view InternString(absl::string_view name) {
  return *InternStringPtr(name);
}

const std::string* InternStringPtr(absl::string_view name) {
  struct Table {
    Mutex mu;
    absl::node_hash_set<std::string> names ABSL_GUARDED_BY(mu);
  };
  static Table* const table = new Table;  // never destroyed
  MutexLock lock(&table->mu);
  auto it = table->names.find(name);
  if (it == table->names.end()) it = table->names.emplace(name).first;
  return &*it;  // node_hash_set never moves its elements
}

absl::Status ValidateGrainKey(absl::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("the grain key is empty");
  if (key.size() > kMaxGrainKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the grain key is ", key.size(), " bytes; at most ",
                     kMaxGrainKeyBytes, " are allowed"));
  }
  return absl::OkStatus();
}

std::string GrainId::ToString() const { return absl::StrCat(type_, "/", key_); }

}  // namespace granary
