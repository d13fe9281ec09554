#include "silo/gateway/gateway_call.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/grain_id.h"
#include "core/grain_interface.h"
#include "core/status.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "rpc/credentials.h"
#include "rpc/gateway_stream.h"
#include "silo/runtime/reminder_service.h"

namespace granary::silo {

void OpenCalls::Add(uint64_t id, CallBase* call) {
  MutexLock lock(&mu_);
  calls_[id] = call;
}

void OpenCalls::Remove(uint64_t id, CallBase* call) {
  MutexLock lock(&mu_);
  auto it = calls_.find(id);
  if (it != calls_.end() && it->second == call) calls_.erase(it);
}

void OpenCalls::Cancel(const google::protobuf::RepeatedField<uint64_t>& ids) {
  for (uint64_t id : ids) {
    CallBase* call;
    {
      MutexLock lock(&mu_);
      auto it = calls_.find(id);
      if (it == calls_.end()) continue;
      // Open calls are alive: their finisher removes them before letting go.
      call = it->second;
      call->AddRef();
    }
    call->Cancel();
    call->Release();
  }
}

size_t OpenCalls::size() const {
  MutexLock lock(&mu_);
  return calls_.size();
}

int64_t CallBytes(const v1::Request& request) {
  return 256 + static_cast<int64_t>(request.key().size() +
                                    request.payload().size() +
                                    rpc::RequestContextBytes(request));
}

std::shared_ptr<const std::string> CallerOf(
    const grpc::CallbackServerContext& context) {
  std::string identity = rpc::CallerIdentity(context);
  if (identity.empty()) return nullptr;
  return std::make_shared<const std::string>(std::move(identity));
}

absl::StatusOr<CallBase*> CallFromGatewayRequest(
    const Route& route, v1::Request& request, bool from_silos,
    const std::shared_ptr<const std::string>& caller, const Silo* silo) {
  GRANARY_RETURN_IF_ERROR(ValidateGrainKey(request.key()));
  std::shared_ptr<const ContextMap> values;
  if (!request.context().empty()) {
    ContextMap entries;
    entries.reserve(request.context().size());
    for (v1::ContextEntry& e : *request.mutable_context()) {
      entries.emplace_back(std::move(*e.mutable_key()),
                           std::move(*e.mutable_value()));
    }
    GRANARY_ASSIGN_OR_RETURN(values, MakeContextValues(std::move(entries)));
  }
  absl::Duration timeout = kDefaultCallTimeout;
  if (request.timeout_us() != 0) {
    timeout = absl::Microseconds(
        std::min<uint64_t>(request.timeout_us(), uint64_t{1} << 62));
  }
  CallBase* call = nullptr;
  if (route.method == nullptr) {
    GRANARY_ASSIGN_OR_RETURN(
        call, ReminderCallFromWire(*route.iface,
                                   std::move(*request.mutable_key()),
                                   request.payload()));
  } else {
    google::protobuf::io::ArrayInputStream payload(
        request.payload().data(),
        static_cast<int>(request.payload().size()));
    GRANARY_ASSIGN_OR_RETURN(
        call, NewCallFromWire(*route.iface, *route.method,
                              std::move(*request.mutable_key()), &payload,
                              timeout));
  }
  call->set_caller_tag(request.id());
  // A new chain (the client's is not trusted), unless a silo passes its
  // own on; the trace the caller sent, continued with a new span.
  RequestContext context{call->request_context().chain_id, nullptr,
                         std::move(values),
                         ContinueTrace(request.traceparent()), {}};
  if (from_silos) {
    call->set_hops(request.hops());
    if (request.chain_id() != 0) context.chain_id = request.chain_id();
    if (!request.caller().empty()) {
      context.caller = std::make_shared<const std::string>(
          std::move(*request.mutable_caller()));
    }
    // "<type>/<key>" of a type hosted here (its name lives as long as the
    // process); ignored otherwise.
    const absl::string_view from = request.caller_grain();
    if (const size_t slash = from.find('/');
        silo != nullptr && slash != absl::string_view::npos &&
        ValidateGrainKey(from.substr(slash + 1)).ok()) {
      if (const InterfaceInfo* iface =
              silo->FindInterface(from.substr(0, slash))) {
        call->set_caller_grain(
            GrainId(iface->type_name, std::string(from.substr(slash + 1))));
      }
    }
  } else {
    context.caller = caller;
  }
  call->set_request_context(std::move(context));
  return call;
}

v1::Reply ReplyOfCall(CallBase& call, int max_message_bytes,
                      bool from_silos) {
  v1::Reply reply;
  reply.set_id(call.caller_tag());
  const absl::Status& status = call.status();
  if (status.ok()) {
    std::string* payload = reply.mutable_payload();
    const int limit = max_message_bytes - 1024;
    if (!call.reply().SerializeToString(payload)) {
      reply.clear_payload();
      reply.set_code(static_cast<int>(absl::StatusCode::kInternal));
      reply.set_message("reply failed to serialize");
    } else if (payload->size() > static_cast<size_t>(limit)) {
      reply.clear_payload();
      reply.set_code(static_cast<int>(absl::StatusCode::kResourceExhausted));
      reply.set_message(absl::StrCat(
          "reply of ", call.target().ToString(), " is ", payload->size(),
          " bytes, over the gateway's message limit of ", limit));
    }
  } else {
    reply.set_code(static_cast<int>(status.code()));
    reply.set_message(std::string(status.message()));
  }
  // Tells a client where the grain lives (one hop next time).
  if (!from_silos && !call.host_gateway().empty()) {
    reply.set_host_gateway(std::string(call.host_gateway()));
  }
  return reply;
}

}  // namespace granary::silo
