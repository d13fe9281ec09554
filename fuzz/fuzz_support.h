// File: fuzz/fuzz_support.h
// -----------------------------------------------------------------------------
// What the libFuzzer targets in fuzz/ share: quiet logs, the bound on input
// size, the silo hosting the example grains that the gateway, bridge and
// admin targets drive, and a bounded wait for a call's completion.
//
//   extern "C" int LLVMFuzzerInitialize(int*, char***) {
//     granary::fuzz::QuietLogs();
//     return 0;
//   }
//   extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
//     if (size > granary::fuzz::kMaxInputBytes) return -1;
//     granary::silo::Runtime& silo = granary::fuzz::ExampleSilo();
//     ...
//   }
//
// Threading: ExampleSilo() is thread-safe (created once, on first use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/call.h"

namespace granary::silo {
class Runtime;
}  // namespace granary::silo

namespace granary::fuzz {

// Inputs above this size are rejected (return -1): a target's work per
// input stays bounded, and the corpus small.
inline constexpr size_t kMaxInputBytes = 64 * 1024;

// Only errors reach stderr: a fuzzer runs millions of inputs, most of them
// refused with a warning. Protobuf's own log lines are dropped.
void QuietLogs();

// A started silo hosting the example grains, registered as granary-silo
// registers them (examples::AddExampleGrains). Created on first use and
// never stopped or freed: it serves every input of the process, and its
// threads run until exit. Its options keep a long run bounded: short idle
// timeouts, a cap on activations, and reminders that tick at most hourly.
silo::Runtime& ExampleSilo();

// The completion of one call handed to a silo, shared between the waiting
// fuzzer and the call's done callback: whichever lets go last frees it, so
// a call still running when the wait gives up is no leak.
class CallWaiter {
 public:
  // A waiter for `call`, whose done callback it sets. The call is then
  // handed to its invoker by the caller.
  static std::shared_ptr<CallWaiter> Attach(CallBase* call);
  // True once the call finished within `timeout`; then status() and
  // reply() hold its outcome (the call itself may be gone by then).
  bool Wait(absl::Duration timeout) {
    return done_.WaitForNotificationWithTimeout(timeout);
  }
  const absl::Status& status() const { return status_; }
  // The reply serialized as the gRPC bridge sends it (OK calls only).
  const std::string& reply() const { return reply_; }
  bool reply_serialized() const { return reply_serialized_; }

 private:
  static void Done(void* ctx, CallBase* call);
  absl::Status status_;
  std::string reply_;
  bool reply_serialized_ = false;
  absl::Notification done_;
};

// Reads a fuzz input front to back; past its end every read gives zeros
// (or an empty view), so any input is a valid one.
//
//   InputReader in(data, size);
//   uint8_t op = in.Byte();
//   std::string_view payload = in.Bytes(in.U16());
class InputReader {
 public:
  InputReader(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint8_t Byte() {
    return at_ < size_ ? static_cast<uint8_t>(data_[at_++]) : 0;
  }
  // Little-endian.
  uint16_t U16() {
    const uint16_t lo = Byte();
    return static_cast<uint16_t>(lo | (Byte() << 8));
  }
  // The next `n` bytes, or as many as are left.
  std::string_view Bytes(size_t n) {
    const size_t take = n < size_ - at_ ? n : size_ - at_;
    std::string_view out(data_ + at_, take);
    at_ += take;
    return out;
  }
  std::string_view Rest() { return Bytes(size_ - at_); }

 private:
  const char* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace granary::fuzz
