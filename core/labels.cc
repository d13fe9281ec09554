#include "core/labels.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace granary {
namespace {

bool KeyChar(char c) {
  return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' ||
         c == '_' || c == '-';
}

bool ValueChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
}

// Printable and short, for an error message quoting client text.
std::string Quote(absl::string_view s) {
  std::string out;
  for (char c : s.substr(0, 80)) {
    out.push_back(absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : '?');
  }
  return out;
}

}  // namespace

absl::Status ValidateLabel(absl::string_view key, absl::string_view value) {
  if (key.empty() || key.size() > kMaxLabelPartBytes ||
      !std::all_of(key.begin(), key.end(), KeyChar) ||
      !absl::ascii_isalnum(static_cast<unsigned char>(key[0]))) {
    return absl::InvalidArgumentError(
        absl::StrCat("label key '", Quote(key),
                     "' must be 1 to 63 characters of [a-z0-9._-] starting "
                     "with a letter or digit"));
  }
  if (value.size() > kMaxLabelPartBytes ||
      !std::all_of(value.begin(), value.end(), ValueChar)) {
    return absl::InvalidArgumentError(
        absl::StrCat("label value '", Quote(value), "' of key ", key,
                     " must be up to 63 characters of [A-Za-z0-9._-]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Labels> ParseLabels(absl::string_view text) {
  Labels labels;
  if (text.empty()) return labels;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("label '", Quote(part),
                       "' is not key=value (labels look like "
                       "zone=a,role=billing)"));
    }
    absl::string_view key = part.substr(0, eq);
    absl::string_view value = part.substr(eq + 1);
    if (absl::Status s = ValidateLabel(key, value); !s.ok()) return s;
    if (static_cast<int>(labels.size()) >= kMaxLabels) {
      return absl::InvalidArgumentError(
          absl::StrCat("at most ", kMaxLabels, " labels"));
    }
    labels.emplace_back(std::string(key), std::string(value));
  }
  std::sort(labels.begin(), labels.end());
  for (size_t i = 1; i < labels.size(); ++i) {
    if (labels[i].first == labels[i - 1].first) {
      return absl::InvalidArgumentError(
          absl::StrCat("label key ", labels[i].first, " is given twice"));
    }
  }
  return labels;
}

std::string FormatLabels(const Labels& labels) {
  return absl::StrJoin(labels, ",", absl::PairFormatter("="));
}

bool LabelsMatch(const Labels& filter, const Labels& labels) {
  for (const auto& want : filter) {
    auto it = std::lower_bound(
        labels.begin(), labels.end(), want.first,
        [](const auto& l, const std::string& key) { return l.first < key; });
    if (it == labels.end() || it->first != want.first ||
        it->second != want.second) {
      return false;
    }
  }
  return true;
}

}  // namespace granary
