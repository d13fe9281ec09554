// File: core/labels.h
// -----------------------------------------------------------------------------
// Silo labels and the placement filters that select by them (DESIGN.md,
// "Rolling upgrades"): `granary-silo --labels=zone=a,role=billing` gives a
// silo its labels; a grain type's `placement_filter: "role=billing"` keeps
// its activations on silos carrying every label the filter names.
//
//   absl::StatusOr<Labels> mine = ParseLabels("zone=a,role=billing");
//   absl::StatusOr<Labels> want = ParseLabels("role=billing");
//   LabelsMatch(*want, *mine);  // true
//
// A label is `key=value`: a key of 1 to 63 characters of [a-z0-9._-]
// starting with a letter or digit, a value of 0 to 63 characters of
// [A-Za-z0-9._-]; keys are unique; at most kMaxLabels labels.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace granary {

inline constexpr int kMaxLabels = 16;
inline constexpr size_t kMaxLabelPartBytes = 63;

// key=value pairs, sorted by key.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Parses "k=v,k2=v2" (empty: no labels); INVALID_ARGUMENT naming the bad
// label otherwise.
absl::StatusOr<Labels> ParseLabels(absl::string_view text);
// OK when `key` and `value` make a valid label.
absl::Status ValidateLabel(absl::string_view key, absl::string_view value);
// "k=v,k2=v2", sorted by key.
std::string FormatLabels(const Labels& labels);
// Every label of `filter` is among `labels`, with the same value.
bool LabelsMatch(const Labels& filter, const Labels& labels);

}  // namespace granary
