// File: silo/gateway/gateway_call.h
// -----------------------------------------------------------------------------
// Who calls through a Gateway stream, and the call a request read from it
// asks for, before the stream charges and starts it
// (silo/gateway/gateway_service.cc).
//
//   absl::StatusOr<CallBase*> call =
//       CallFromGatewayRequest(route, request, from_silos, caller, silo);
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/call.h"
#include "core/log.h"
#include "core/sync.h"
#include "granary/v1/gateway.pb.h"
#include "silo/gateway/gateway_service_impl.h"

namespace granary::silo {

class Silo;

// At debug level: `call` of gRPC path `method` was accepted `from` "client",
// "silo" or "grpc", with its trace id (how one request is followed through
// a silo's log).
#define GRANARY_LOG_CALL_ACCEPTED(call, method, from)                     \
  GRANARY_LOG(kDebug) << "trace_id="                                      \
                      << (call).request_context().trace.TraceIdHex()      \
                      << " grain=" << LogQuote((call).target().ToString()) \
                      << " method=" << LogQuote(method) << " from=" << (from) \
                      << " call accepted"

// What a call of `request` holds while it runs: its key, request (the
// payload's size stands in for the parsed message's) and context, and the
// call.
int64_t CallBytes(const v1::Request& request);

// The identity a client stream was accepted with; null when anonymous.
std::shared_ptr<const std::string> CallerOf(
    const grpc::CallbackServerContext& context);

// A new call (holding one reference) of `route` built from `request`, whose
// key (and caller) it moves out. Errors: a key that is not valid, or a
// payload that does not parse -> INVALID_ARGUMENT. The call's deadline is
// the request's timeout (kDefaultCallTimeout without one); its caller tag
// is the request's id. From another silo (`from_silos`) the request carries
// its hop count, call chain and the identity of the client it serves; from a
// client, the call serves `caller` (null: anonymous). Every request's
// context entries are validated (INVALID_ARGUMENT past the bounds of
// core/request_context.h) and its traceparent continued. From another silo
// the calling grain is kept when its type is one `silo` hosts (for call
// filters).
absl::StatusOr<CallBase*> CallFromGatewayRequest(
    const Route& route, v1::Request& request, bool from_silos,
    const std::shared_ptr<const std::string>& caller, const Silo* silo);

// The awaited calls a stream accepted and has not answered, by request id,
// so that a cancel from its client (RequestBatch.cancels) reaches them.
// Thread-safe.
class OpenCalls {
 public:
  // `call` (id != 0) was accepted; a duplicate id replaces the older call,
  // which can then no longer be cancelled.
  void Add(uint64_t id, CallBase* call);
  // `call` finished (before its done callback returns).
  void Remove(uint64_t id, CallBase* call);
  // Cancels the open calls among `ids`.
  void Cancel(const google::protobuf::RepeatedField<uint64_t>& ids);
  size_t size() const;

 private:
  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, CallBase*> calls_ ABSL_GUARDED_BY(mu_);
};

// The reply to write for a finished awaited `call`: its serialized reply,
// or its error; RESOURCE_EXHAUSTED when the reply would not fit a message
// of `max_message_bytes` (less 1 KiB for the batch). To a client (not
// `from_silos`) it names the gateway of the grain's silo when known.
v1::Reply ReplyOfCall(CallBase& call, int max_message_bytes,
                      bool from_silos);

}  // namespace granary::silo
