// File: core/grain_id.h
// -----------------------------------------------------------------------------
// GrainId: the identity of a grain, its type name plus a caller-chosen key.
//
//   GrainId id(CounterRef::kTypeName, "alice");
//   id.ToString();  // "granary.examples.Counter/alice"
//
// The type name is interned: `type()` views storage that lives as long as the
// process, so copying a GrainId copies only the key. Generated code passes its
// static type-name constants; names that arrive at run time (from the wire)
// go through InternTypeName() first.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace granary {

// Grain keys are non-empty and at most this many bytes.
inline constexpr size_t kMaxGrainKeyBytes = 4096;

// OK, or INVALID_ARGUMENT saying what is wrong with `key`.
absl::Status ValidateGrainKey(absl::string_view key);

// Returns a view of `name` with static storage duration. Thread-safe; meant
// for the few distinct type names a process sees, not for arbitrary strings.
absl::string_view InternTypeName(absl::string_view name);
// The same for any string the process keeps for its whole life (a silo's
// gateway address, for instance): never freed, so only for bounded sets.
absl::string_view InternString(absl::string_view s);
// The interned string itself, for a field that must be published atomically
// (one pointer, where a string_view is two words).
const std::string* InternStringPtr(absl::string_view s);

class GrainId {
 public:
  GrainId() = default;
  // `type` must have static storage duration (a generated constant or the
  // result of InternTypeName).
  GrainId(absl::string_view type, std::string key)
      : type_(type), key_(std::move(key)) {}

  absl::string_view type() const { return type_; }
  const std::string& key() const { return key_; }
  std::string ToString() const;

  friend bool operator==(const GrainId& a, const GrainId& b) {
    return a.key_ == b.key_ && a.type_ == b.type_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const GrainId& id) {
    return H::combine(std::move(h), id.type_, id.key_);
  }

 private:
  absl::string_view type_;
  std::string key_;
};

}  // namespace granary
