// File: silo/gateway/grpc_bridge.h
// -----------------------------------------------------------------------------
// Standard gRPC access to grains. Every grain type is a protobuf service, so
// a stock gRPC stub (C++, Python, Go, grpcurl...) can call it: a unary call to
// `/granary.examples.Counter/Add` with metadata `granary-key: alice` reaches
// grain Counter/alice.
//
// protoc-gen-granary generates, per grain type, a named gRPC service whose
// methods are raw (bytes in, bytes out) and call ServeUnary; the silo's
// gateway registers one per hosted type (see GatewayServer). Named services
// let server reflection list the grain types; raw bytes let a payload that
// does not parse be INVALID_ARGUMENT (gRPC's own typed path would say
// INTERNAL). The client's deadline is the grain call's, and a client that
// cancels its call cancels the grain call (core/cancel.h).
//
// Included only by generated .grain.cc files and the gateway.
#pragma once

#include <cstdint>
#include <map>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "core/grain_interface.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"

namespace granary::silo {

// Metadata naming the grain key of a standard gRPC call.
inline constexpr char kGrainKeyMetadata[] = "granary-key";
// Metadata `granary-ctx-<key>: <value>` sets request context entry <key>
// (core/request_context.h); `traceparent` is the W3C trace header.
inline constexpr char kContextMetadataPrefix[] = "granary-ctx-";
inline constexpr char kTraceparentMetadata[] = "traceparent";

// The request context a standard gRPC call's metadata sets: its
// `granary-ctx-*` entries (INVALID_ARGUMENT past the bounds of
// core/request_context.h) and its traceparent continued with a new span (a
// new trace without one). Leaves `context`'s chain and caller alone.
absl::Status ContextFromMetadata(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    RequestContext* context);

// Serves one unary call of `method` of grain type `iface` through `invoker`.
// Errors: missing or empty key -> INVALID_ARGUMENT; request bytes that do
// not parse -> INVALID_ARGUMENT; the silo's budget for remote calls used up
// (Runtime::remote_memory(), charged while the call runs) ->
// RESOURCE_EXHAUSTED; the grain's own status otherwise. A one-way method
// answers Empty once its turn ran (or the status that kept it from
// running), so a caller that awaits its answers is paced by the grain. The
// call's gRPC deadline becomes the grain call's timeout (default 30 s
// without one).
grpc::ServerUnaryReactor* ServeUnary(CallInvoker* invoker,
                                     grpc::CallbackServerContext* context,
                                     const InterfaceInfo& iface,
                                     uint32_t method,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response);

// Serves one server-streaming call (`rpc M(R) returns (stream E)`): each
// message the grain writes is sent as it comes, and the call ends with the
// stream's status (OK when the grain ended it; UNAVAILABLE when its
// activation went away, so the client subscribes again). Refusals as for
// ServeUnary. No deadline unless the client set one; a client's cancel, or
// a write that fails because it went away, cancels the stream (the grain's
// writes then fail).
grpc::ServerWriteReactor<grpc::ByteBuffer>* ServeServerStream(
    CallInvoker* invoker, grpc::CallbackServerContext* context,
    const InterfaceInfo& iface, uint32_t method,
    const grpc::ByteBuffer* request);

// What ServeUnary makes of a request before any grain sees it: a new call
// (holding one reference) of `method` of grain type `iface`, to the grain
// whose key is `key` (the value of the granary-key metadata; null when the
// metadata is absent), its request parsed from `request`, with `timeout`
// (the time left until the caller's deadline; kDefaultCallTimeout without
// one). Errors, in this order: missing, empty or invalid key ->
// INVALID_ARGUMENT; no time left -> DEADLINE_EXCEEDED; a request that would
// take more than four times its size, or 16 MiB, once parsed ->
// RESOURCE_EXHAUSTED (core/parsed_size.h), before it is parsed; request
// bytes that do not parse -> INVALID_ARGUMENT. `*parsed_bytes`, when given,
// gets what the request holds parsed.
absl::StatusOr<CallBase*> UnaryCallFromWire(const InterfaceInfo& iface,
                                            uint32_t method,
                                            const grpc::string_ref* key,
                                            absl::Duration timeout,
                                            const grpc::ByteBuffer* request,
                                            int64_t* parsed_bytes = nullptr);

}  // namespace granary::silo
