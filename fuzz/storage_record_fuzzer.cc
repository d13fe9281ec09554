// Fuzzes the records RocksDbStorage keeps (storage/rocksdb_codec.h): what a
// silo reads back from its data directory when a grain activates (the
// state value) and when it starts (every reminder row).
//
// Input layout:
//   byte 0     what the rest is: even, a grain state value (the state is
//              then also parsed as the example grains' state messages, as
//              their activations do); odd, a reminder row
//   reminder:  U16 key length (little-endian), the key, then the value
// Checked: whatever decodes encodes back to the very same bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/grain_id.h"
#include "examples/alarm.pb.h"
#include "examples/bank.pb.h"
#include "fuzz/fuzz_support.h"
#include "storage/rocksdb_codec.h"
#include "storage/rocksdb_storage.h"

namespace granary::fuzz {
namespace {

namespace codec = storage::rocksdb_codec;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "storage_record: %s\n", what.c_str());
  std::abort();
}

void State(const std::string& value) {
  const GrainId id("granary.examples.BankAccount", "fuzz");
  absl::StatusOr<storage::StoredState> state = codec::DecodeState(id, value);
  if (!state.ok()) {
    if (value.size() >= codec::kVersionBytes) {
      Fail("a value long enough to hold a version did not decode");
    }
    return;
  }
  const uint64_t version = codec::DecodeVersion(value);
  if (!state->exists || state->etag != codec::Etag(version) ||
      codec::EncodeValue(version, state->bytes) != value) {
    Fail(absl::StrCat("state value of ", value.size(),
                      " bytes does not encode back (etag ", state->etag, ")"));
  }
  // The activation parses the state into its grain's message.
  examples::AccountState account;
  (void)account.ParseFromString(state->bytes);
  examples::AlarmRecord alarms;
  (void)alarms.ParseFromString(state->bytes);
}

void Reminder(InputReader& in) {
  const std::string key(in.Bytes(in.U16()));
  const std::string value(in.Rest());
  absl::StatusOr<storage::ReminderRow> row = codec::DecodeReminder(key, value);
  if (!row.ok()) return;
  if (storage::ReminderKey(row->grain, row->name) != key) {
    Fail(absl::StrCat("reminder key of ", row->grain.ToString(), " '",
                      row->name, "' does not encode back"));
  }
  if (codec::EncodeReminder(*row) != value) {
    Fail(absl::StrCat("reminder value of ", row->grain.ToString(), " '",
                      row->name, "' does not encode back"));
  }
}

}  // namespace
}  // namespace granary::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  granary::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary::fuzz;
  if (size > kMaxInputBytes) return -1;
  InputReader in(data, size);
  if (in.Byte() % 2 == 0) {
    State(std::string(in.Rest()));
  } else {
    Reminder(in);
  }
  return 0;
}
