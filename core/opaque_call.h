// File: core/opaque_call.h
// -----------------------------------------------------------------------------
// A call a silo passes on without knowing its grain type or method: during a
// rolling upgrade a silo of the old release receives calls for a type or a
// method only the new release has (docs/upgrades.md). It keeps the gRPC
// path and the serialized request as they came, and the reply as the host
// sent it, so it can forward both without their descriptors.
//
//   auto* call = new OpaqueCall(GrainId(type, key), "/pkg.T/M", one_way);
//   if (!call->ParseRequest(payload)) ...   // INVALID_ARGUMENT
//   runtime->Invoke(call);                  // routed to a silo hosting T
//
// The request and reply are google.protobuf.Empty messages holding the
// bytes as unknown fields, which protobuf keeps and writes back unchanged.
// The method index is kOpaqueMethod; no activation ever runs one.
#pragma once

#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "core/call.h"
#include "google/protobuf/empty.pb.h"

namespace granary {

class OpaqueCall final : public CallBase {
 public:
  OpaqueCall(GrainId target, std::string method_path, bool one_way)
      : CallBase(std::move(target), kOpaqueMethod, one_way),
        method_path_(std::move(method_path)) {}

  // False when `payload` is not a protobuf message.
  bool ParseRequest(absl::string_view payload) {
    return request_.ParseFromArray(payload.data(),
                                   static_cast<int>(payload.size()));
  }
  // "/granary.examples.Counter/Reset".
  const std::string& method_path() const { return method_path_; }
  // "Reset".
  absl::string_view method_name() const {
    absl::string_view p = method_path_;
    return p.substr(p.rfind('/') + 1);
  }

  google::protobuf::Message& request() override { return request_; }
  google::protobuf::Message& reply() override { return reply_; }

 private:
  std::string method_path_;
  google::protobuf::Empty request_;
  google::protobuf::Empty reply_;
};

// The opaque call `call` is, or nullptr.
inline OpaqueCall* AsOpaque(CallBase* call) {
  return call->method() == kOpaqueMethod ? static_cast<OpaqueCall*>(call)
                                         : nullptr;
}

}  // namespace granary
