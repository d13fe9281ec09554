#include "storage/rocksdb_codec.h"

#include "absl/base/internal/endian.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "storage/rocksdb_storage.h"

namespace granary::storage::rocksdb_codec {

std::string EncodeValue(uint64_t version, const std::string& bytes) {
  std::string value(kVersionBytes, '\0');
  absl::little_endian::Store64(value.data(), version);
  value.append(bytes);
  return value;
}

uint64_t DecodeVersion(const std::string& value) {
  if (value.size() < kVersionBytes) return 0;
  return absl::little_endian::Load64(value.data());
}

std::string Etag(uint64_t version) {
  return version == 0 ? std::string() : absl::StrCat(version);
}

absl::StatusOr<StoredState> DecodeState(const GrainId& id,
                                        const std::string& value) {
  if (value.size() < kVersionBytes) {
    return absl::DataLossError(
        absl::StrCat("stored state of ", id.ToString(), " is truncated"));
  }
  StoredState state;
  state.exists = true;
  state.etag = Etag(DecodeVersion(value));
  state.bytes = value.substr(kVersionBytes);
  return state;
}

std::string EncodeReminder(const ReminderRow& row) {
  std::string value(kReminderValueBytes, '\0');
  value[0] = kReminderFormat;
  absl::little_endian::Store64(
      value.data() + 1, static_cast<uint64_t>(absl::ToUnixMicros(row.start)));
  absl::little_endian::Store64(
      value.data() + 9,
      static_cast<uint64_t>(absl::ToInt64Microseconds(row.period)));
  return value;
}

absl::StatusOr<ReminderRow> DecodeReminder(absl::string_view key,
                                           absl::string_view value) {
  const size_t nul = key.find('\0');
  if (nul == absl::string_view::npos || nul == 0 || key.size() < nul + 5) {
    return absl::DataLossError("reminder key is malformed");
  }
  const absl::string_view type = key.substr(0, nul);
  const uint32_t key_len = absl::big_endian::Load32(key.data() + nul + 1);
  const size_t key_at = nul + 5;
  if (key.size() - key_at < key_len) {
    return absl::DataLossError("reminder key is truncated");
  }
  ReminderRow row;
  row.grain =
      GrainId(InternTypeName(type), std::string(key.substr(key_at, key_len)));
  row.name = std::string(key.substr(key_at + key_len));
  if (value.size() != kReminderValueBytes || value[0] != kReminderFormat) {
    return absl::DataLossError(absl::StrCat(
        "reminder '", row.name, "' of ", row.grain.ToString(),
        " has an unknown value format (", value.size(), " bytes)"));
  }
  row.start = absl::FromUnixMicros(
      static_cast<int64_t>(absl::little_endian::Load64(value.data() + 1)));
  row.period = absl::Microseconds(
      static_cast<int64_t>(absl::little_endian::Load64(value.data() + 9)));
  return row;
}

}  // namespace granary::storage::rocksdb_codec

namespace granary::storage {

// The keys (declared in storage/rocksdb_storage.h).
std::string StateKey(const GrainId& id) {
  std::string key(id.type());
  key.push_back('\0');
  key.append(id.key());
  return key;
}

std::string ReminderKey(const GrainId& grain, absl::string_view name) {
  std::string key(grain.type());
  key.push_back('\0');
  char len[4];
  absl::big_endian::Store32(len, static_cast<uint32_t>(grain.key().size()));
  key.append(len, 4);
  key.append(grain.key());
  key.append(name.data(), name.size());
  return key;
}

}  // namespace granary::storage
