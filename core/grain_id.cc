#include "core/grain_id.h"

#include <memory>

#include "absl/container/node_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/sync.h"

namespace granary {

absl::string_view InternTypeName(absl::string_view name) {
  struct Table {
    Mutex mu;
    absl::node_hash_set<std::string> names ABSL_GUARDED_BY(mu);
  };
  static Table* const table = new Table;  // never destroyed
  MutexLock lock(&table->mu);
  auto it = table->names.find(name);
  if (it == table->names.end()) it = table->names.emplace(name).first;
  return *it;  // node_hash_set never moves its elements
}

std::string GrainId::ToString() const { return absl::StrCat(type_, "/", key_); }

}  // namespace granary
