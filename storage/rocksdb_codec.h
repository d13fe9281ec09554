// File: storage/rocksdb_codec.h
// -----------------------------------------------------------------------------
// The records RocksDbStorage (storage/rocksdb_storage.h) keeps, as bytes:
// pure functions, so the decoders can be tested and fuzzed without a
// database.
//
//   grain state  value: 8-byte little-endian version (the etag), then the
//                serialized state message
//   reminder     key:   see ReminderKey in rocksdb_storage.h
//                value: format byte (1), first tick and period in
//                microseconds (8 bytes each, little-endian)
//
//   std::string value = rocksdb_codec::EncodeValue(7, state_bytes);
//   absl::StatusOr<StoredState> s = rocksdb_codec::DecodeState(id, value);
//   // s->etag == "7", s->bytes == state_bytes
//
// Threading: stateless; DecodeReminder interns the row's grain type name
// (core/grain_id.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/grain_id.h"
#include "storage/grain_storage.h"
#include "storage/reminder_table.h"

namespace granary::storage::rocksdb_codec {

// Bytes of the version in front of a stored state.
inline constexpr size_t kVersionBytes = 8;
// The format byte of a reminder value, and the value's size.
inline constexpr char kReminderFormat = 1;
inline constexpr size_t kReminderValueBytes = 1 + 8 + 8;

// A stored state: `version`, then `bytes`.
std::string EncodeValue(uint64_t version, const std::string& bytes);
// The version of a stored value, or 0 when it is too short to hold one.
uint64_t DecodeVersion(const std::string& value);
// The etag of `version`: "" for 0 (nothing stored), else its decimal text.
std::string Etag(uint64_t version);
// The state `value` holds for grain `id` (named in the error): DATA_LOSS
// when it is too short to hold a version.
absl::StatusOr<StoredState> DecodeState(const GrainId& id,
                                        const std::string& value);

// The value stored for reminder `row` (its key is ReminderKey).
std::string EncodeReminder(const ReminderRow& row);
// The row stored under `key` / `value`, or DATA_LOSS naming what is wrong.
absl::StatusOr<ReminderRow> DecodeReminder(absl::string_view key,
                                           absl::string_view value);

}  // namespace granary::storage::rocksdb_codec
