#include "rpc/gateway_set.h"

#include <algorithm>

#include "core/opaque_call.h"
#include "core/process.h"
#include "rpc/callback_queue.h"

namespace granary::rpc {

absl::Status ValidateGatewaySetOptions(const GatewaySetOptions& options) {
  if (options.gateways.empty()) {
    return absl::InvalidArgumentError("no gateway address given");
  }
  for (const std::string& address : options.gateways) {
    std::string host;
    int port = 0;
    if (!SplitHostPort(address, &host, &port) || port == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gateway address '", address, "' is not HOST:PORT"));
    }
  }
  if (options.max_in_flight < 1) {
    return absl::InvalidArgumentError("max_in_flight must be positive");
  }
  if (options.max_message_bytes < 4096) {
    return absl::InvalidArgumentError(
        "max_message_bytes must be at least 4096");
  }
  if (options.gateway_refresh_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "gateway_refresh_period must not be negative");
  }
  if (options.location_cache_size < 0) {
    return absl::InvalidArgumentError(
        "location_cache_size must not be negative");
  }
  if (options.reconnect_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("reconnect_period must be positive");
  }
  GRANARY_RETURN_IF_ERROR(ValidateClientSecurity(options.security, "security"));
  for (const std::string& gateway : options.gateways) {
    GRANARY_RETURN_IF_ERROR(CheckTokenTransport(options.security, gateway));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GatewaySet>> GatewaySet::Connect(
    GatewaySetOptions options) {
  GRANARY_RETURN_IF_ERROR(ValidateGatewaySetOptions(options));
  const absl::Duration timeout = options.connect_timeout;
  InitProcess();
  HoldGrpcCallbackQueue();
  auto set = std::make_unique<GatewaySet>(std::move(options));
  GRANARY_RETURN_IF_ERROR(set->Start());
  GRANARY_RETURN_IF_ERROR(set->WaitForConnected(timeout));
  return set;
}

void GatewaySet::Invoke(CallBase* call) {
  // We own one reference on `call`.
  auto fail = [call](absl::Status status) {
    call->Fail(std::move(status));
    call->Release();
  };
  if (closed()) {
    return fail(absl::Status(options_.closed_code, "the client is closed"));
  }
  const OpaqueCall* opaque = AsOpaque(call);
  const InterfaceInfo* iface =
      opaque != nullptr ? nullptr : FindInterface(call->target().type());
  // A reminder tick a silo passes to the grain's silo (core/call.h).
  const bool reminder_tick = call->method() == kReminderMethod;
  // (A tick of a type this process does not know, which a silo passes on
  // to one that hosts it, needs no interface: its path names the type.)
  if (opaque == nullptr && !(reminder_tick && iface == nullptr) &&
      (iface == nullptr ||
       (call->method() >= iface->method_count && !reminder_tick))) {
    return fail(absl::UnimplementedError(absl::StrCat(
        "grain type ", call->target().type(), " method #", call->method(),
        " is not registered with this client (obtain references with "
        "Client::Get)")));
  }
  if (absl::Status valid = ValidateGrainKey(call->target().key());
      !valid.ok()) {
    return fail(std::move(valid));
  }
  v1::Request request;
  if (opaque != nullptr) {
    request.set_method(opaque->method_path());
    request.set_opaque(true);
  } else {
    request.set_method(
        reminder_tick
            ? ReminderMethodPath(iface != nullptr ? iface->type_name
                                                  : call->target().type())
            : std::string(iface->methods[call->method()].full_name));
  }
  // What a new activation needs: the caller's version of the interface.
  const uint32_t min_version = std::max<uint32_t>(
      call->min_version(), iface != nullptr ? iface->version : 0);
  if (min_version > 1) request.set_min_version(min_version);
  request.set_key(call->target().key());
  if (!call->request().SerializeToString(request.mutable_payload())) {
    return fail(absl::InvalidArgumentError("request failed to serialize"));
  }
  if (RequestBytes(request) + 1024 >
      static_cast<size_t>(options_.max_message_bytes)) {
    return fail(absl::ResourceExhaustedError(absl::StrCat(
        "request to ", call->target().ToString(), " is ",
        request.payload().size(), " bytes, over the message limit of ",
        options_.max_message_bytes)));
  }
  request.set_hops(call->hops());
  request.set_chain_id(call->request_context().chain_id);
  const RequestContext& context = call->request_context();
  if (context.caller != nullptr) request.set_caller(*context.caller);
  if (context.values != nullptr) {
    for (const auto& [k, v] : *context.values) {
      v1::ContextEntry* entry = request.add_context();
      entry->set_key(k);
      entry->set_value(v);
    }
  }
  // The binary form only (25 bytes, no hex); nothing without a trace.
  context.trace.AppendBinary(request.mutable_trace());
  if (const GrainId* from = call->caller_grain()) {
    request.set_caller_grain(from->ToString());
  }
  // A call a silo forwards already has its deadline running there: the
  // next silo gets what is left of it, and no second timer is armed.
  const bool armed = call->deadline_armed();
  if (!call->one_way() &&
      (armed || call->timeout() != absl::InfiniteDuration())) {
    // (A stream without a deadline sends 0: none.)
    const absl::Duration timeout =
        armed ? call->deadline() - timers_.clock()->Now() : call->timeout();
    request.set_timeout_us(static_cast<uint64_t>(
        std::max<int64_t>(1, absl::ToInt64Microseconds(timeout))));
  }
  const bool one_way = call->one_way();
  GatewayConnection* failed = nullptr;
  for (int attempt = 0;; ++attempt) {
    GatewayConnection* link = Pick(call->target(), failed);
    GatewayClientStream* stream = link == nullptr ? nullptr : link->Acquire();
    if (stream == nullptr) {
      if (closed()) {  // Close began since the check above
        return fail(absl::Status(options_.closed_code, "the client is closed"));
      }
      return fail(absl::UnavailableError(absl::StrCat(
          "no gateway is reachable (", absl::StrJoin(gateways(), ", "), ")")));
    }
    if (attempt == 0 && !one_way && !armed) {
      call->set_deadline(timers_.clock()->Now() + call->timeout());
      call->ArmDeadline(&timers_);
    }
    // Once sent, an awaited call may be answered and freed on another
    // thread before Send returns: do not touch it after a successful send.
    absl::Status sent = stream->Send(request, one_way ? nullptr : call);
    stream->Unref();
    if (sent.ok()) break;
    // UNAVAILABLE: the stream ended before it took the request, which
    // therefore went nowhere; another gateway (or a new stream) may take it.
    if (sent.code() != absl::StatusCode::kUnavailable || attempt == 3) {
      return fail(std::move(sent));
    }
    failed = link;
  }
  if (one_way) call->Release();  // written from the request copy
}

}  // namespace granary::rpc
