// Fuzzes standard gRPC access to grains (silo/gateway/grpc_bridge.h): the
// decoding ServeUnary does before a grain sees a call, UnaryCallFromWire
// (the granary-key metadata, the deadline, the raw request bytes in one or
// more slices), and then the call itself in a silo hosting the example
// grains, as the bridge hands it on (a server-streaming call is cancelled
// as soon as it is sent, as by a client that leaves).
//
// Input layout (short inputs read as zeros past their end):
//   byte 0     grain type (index into the silo's types, by name)
//   byte 1     method (index into the type's methods)
//   byte 2     flags: bit 0 the granary-key metadata is present;
//              bits 1-2 deadline: 0 none, 1 already passed, 2-3 in
//              (U16 below) milliseconds; bits 3-4 slices - 1
//   bytes 3-4  key length (little-endian), then the key
//   U16        deadline in milliseconds (deadline modes 2-3 only)
//   rest       the request message bytes
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/grain_interface.h"
#include "fuzz/fuzz_support.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/string_ref.h"
#include "silo/gateway/grpc_bridge.h"
#include "silo/runtime/grain.h"
#include "silo/runtime/runtime.h"

namespace granary::fuzz {
namespace {

// How long one call may take; the example grains answer in microseconds.
constexpr absl::Duration kCallBound = absl::Seconds(5);

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "grpc_bridge: %s\n", what.c_str());
  std::abort();
}

std::vector<const InterfaceInfo*>* types = nullptr;

void Run(const uint8_t* data, size_t size) {
  InputReader in(data, size);
  const InterfaceInfo& iface = *(*types)[in.Byte() % types->size()];
  const uint32_t method = in.Byte() % iface.method_count;
  const uint8_t flags = in.Byte();
  const std::string key(in.Bytes(in.U16()));
  const int deadline_mode = (flags >> 1) & 3;
  const size_t slices = ((flags >> 3) & 3) + 1;

  absl::Duration timeout = kDefaultCallTimeout;
  if (deadline_mode == 1) {
    timeout = -absl::Milliseconds(in.Byte());
  } else if (deadline_mode >= 2) {
    timeout = absl::Milliseconds(in.U16());
  }
  const std::string_view payload = in.Rest();
  std::vector<grpc::Slice> parts;
  const size_t step = payload.size() / slices + 1;
  for (size_t at = 0; at < payload.size(); at += step) {
    const size_t n = std::min(step, payload.size() - at);
    parts.emplace_back(payload.data() + at, n);
  }
  grpc::ByteBuffer request(parts.data(), parts.size());

  const grpc::string_ref key_ref(key);
  absl::StatusOr<CallBase*> made = silo::UnaryCallFromWire(
      iface, method, (flags & 1) != 0 ? &key_ref : nullptr, timeout, &request);
  if (!made.ok()) {
    const absl::StatusCode code = made.status().code();
    if (code != absl::StatusCode::kInvalidArgument &&
        code != absl::StatusCode::kDeadlineExceeded &&
        code != absl::StatusCode::kResourceExhausted) {  // too big parsed
      Fail(absl::StrCat("UnaryCallFromWire answered ",
                        made.status().ToString()));
    }
    return;
  }
  CallBase* call = *made;
  if ((flags & 1) == 0 || key.empty() || timeout <= absl::ZeroDuration()) {
    Fail("a call was made without a key or after its deadline");
  }
  if (call->target().key() != key || call->target().type() != iface.type_name ||
      call->method() != method) {
    Fail(absl::StrCat("the call targets ", call->target().ToString(),
                      " method ", call->method(), ", not what was asked"));
  }
  std::shared_ptr<CallWaiter> waiter = CallWaiter::Attach(call);
  const bool streaming = iface.methods[method].server_streaming;
  if (streaming) call->AddRef();
  ExampleSilo().Invoke(call);
  if (streaming) {
    // A watch runs until its caller leaves: this one leaves at once (the
    // grain's writes then fail, its ObserverSet drops the stream).
    call->Cancel();
    call->Release();
  }
  if (!waiter->Wait(std::min(kCallBound, timeout + absl::Seconds(1)))) {
    return;  // still running; the waiter outlives this input
  }
  if (waiter->status().ok() && !waiter->reply_serialized()) {
    Fail("a reply failed to serialize");
  }
}

}  // namespace
}  // namespace granary::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace granary::fuzz;
  QuietLogs();
  types = new std::vector<const granary::InterfaceInfo*>;
  for (const granary::GrainClassInfo* info : ExampleSilo().GrainTypes()) {
    types->push_back(info->interface);
  }
  std::sort(
      types->begin(), types->end(),
      [](const granary::InterfaceInfo* a, const granary::InterfaceInfo* b) {
        return a->type_name < b->type_name;
      });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > granary::fuzz::kMaxInputBytes) return -1;
  granary::fuzz::Run(data, size);
  return 0;
}
