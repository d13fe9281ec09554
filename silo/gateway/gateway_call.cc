#include "silo/gateway/gateway_call.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/grain_id.h"
#include "core/grain_interface.h"
#include "core/log.h"
#include "core/opaque_call.h"
#include "core/parsed_size.h"
#include "core/request_context.h"
#include "core/status.h"
#include "core/stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "rpc/credentials.h"
#include "rpc/gateway_client_stream.h"
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
  return 256 +
         static_cast<int64_t>(request.key().size() + request.payload().size() +
                              rpc::RequestContextBytes(request));
}

bool SplitMethodPath(absl::string_view path, absl::string_view* type,
                     absl::string_view* method) {
  if (path.size() < 4 || path.front() != '/') return false;
  const size_t slash = path.find('/', 1);
  if (slash == absl::string_view::npos || slash == 1 ||
      slash + 1 >= path.size() ||
      path.find('/', slash + 1) != absl::string_view::npos ||
      path[slash + 1] == '$') {
    return false;
  }
  *type = path.substr(1, slash - 1);
  *method = path.substr(slash + 1);
  return true;
}

absl::StatusOr<Route> OpaqueRoute(const v1::Request& request, Runtime& silo) {
  CallRouter* router = silo.internals().router();
  const absl::string_view path = request.method();
  if (router == nullptr || path.empty() || path.front() != '/') {
    return absl::UnimplementedError(
        absl::StrCat("unknown grain method '", LogQuote(path.substr(0, 512)),
                     "': this silo hosts no such grain type or method"));
  }
  absl::string_view type, method;
  if (!SplitMethodPath(path, &type, &method)) {
    return absl::InvalidArgumentError(
        absl::StrCat("grain method '", LogQuote(path.substr(0, 512)),
                     "' is not /<type>/<method>"));
  }
  Route route{nullptr, nullptr};
  if (const InterfaceInfo* known = silo.FindInterface(type)) {
    // A method this release of the type lacks: only a later one may have it.
    route.opaque_type = known->type_name;
    route.min_version =
        std::max<uint32_t>(known->version + 1, request.min_version());
  } else {
    route.opaque_type = router->HostedTypeName(type);
    route.min_version = std::max<uint32_t>(1, request.min_version());
  }
  if (route.opaque_type.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("no silo of the cluster hosts grain type ",
                     LogQuote(type.substr(0, 256))));
  }
  if (request.stream_window() != 0) {
    // Its items could not be carried by a silo that cannot read them.
    return absl::UnimplementedError(
        absl::StrCat("grain method ", LogQuote(path.substr(0, 512)),
                     " is not known to silo ", silo.name(),
                     ": call it through a silo of the release that has it"));
  }
  return route;
}

absl::Status CheckMinVersion(const Route& route, const v1::Request& request,
                             Runtime& silo) {
  CallRouter* router = silo.internals().router();
  if (request.min_version() <= 1 || router == nullptr) return absl::OkStatus();
  const absl::string_view type =
      route.iface != nullptr ? route.iface->type_name : route.opaque_type;
  if (router->LaterVersionHosted(type, request.min_version() - 1)) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(
      absl::StrCat("no silo of the cluster hosts grain type ", type,
                   " in version ", request.min_version(), " or later"));
}

absl::Status CheckGatewayRoute(const Route* route, const v1::Request& request,
                               bool stopping, Runtime& silo) {
  if (route == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("unknown grain method '", request.method(),
                     "': this silo hosts no such grain type or method"));
  }
  if (stopping && silo.internals().router() == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("silo ", silo.name(), " is shutting down"));
  }
  if (route->method != nullptr && route->method->server_streaming &&
      request.id() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        request.method(), " is server-streaming: its request needs an id"));
  }
  return absl::OkStatus();
}

void ConnectionBytes::Charge(int64_t bytes) {
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (silo_budget_ != nullptr) silo_budget_->Charge(bytes);
}

int64_t ConnectionBytes::Release(int64_t bytes) {
  if (bytes == 0) return bytes_.load(std::memory_order_relaxed);
  const int64_t before = bytes_.fetch_sub(bytes);  // seq_cst (held())
  if (silo_budget_ != nullptr) silo_budget_->Release(bytes);
  return before;
}

v1::Reply ErrorReply(uint64_t id, const absl::Status& error) {
  v1::Reply reply;
  reply.set_id(id);
  reply.set_code(static_cast<int>(error.code()));
  reply.set_message(std::string(error.message()));
  return reply;
}

std::shared_ptr<const std::string> CallerOf(
    const grpc::CallbackServerContext& context) {
  std::string identity = rpc::CallerIdentity(context);
  if (identity.empty()) return nullptr;
  return std::make_shared<const std::string>(std::move(identity));
}

absl::StatusOr<CallBase*> CallFromGatewayRequest(
    const Route& route, v1::Request& request, bool from_silos,
    const std::shared_ptr<const std::string>& caller, const Runtime* silo,
    int64_t max_parsed_bytes, int64_t* parsed_bytes) {
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
  absl::Duration timeout =
      route.method != nullptr && route.method->server_streaming
          ? absl::InfiniteDuration()
          : kDefaultCallTimeout;
  if (request.timeout_us() != 0) {
    timeout = absl::Microseconds(
        std::min<uint64_t>(request.timeout_us(), uint64_t{1} << 62));
  }
  CallBase* call = nullptr;
  if (!route.opaque_type.empty()) {
    // Its reply is read only when it has an id (a one-way call has none).
    auto* opaque = new OpaqueCall(
        GrainId(route.opaque_type, std::move(*request.mutable_key())),
        std::string(request.method()),
        /*one_way=*/request.id() == 0);
    if (!opaque->ParseRequest(request.payload())) {
      opaque->Release();
      return absl::InvalidArgumentError(absl::StrCat(
          "the request of ", LogQuote(request.method()), " does not parse"));
    }
    // Held parsed as unknown fields, it takes more than its wire bytes:
    // charged (and bounded) as such.
    const int64_t used =
        static_cast<int64_t>(opaque->request().SpaceUsedLong());
    if (used > max_parsed_bytes) {
      opaque->Release();
      return absl::ResourceExhaustedError(absl::StrCat(
          "the request of ", LogQuote(request.method()), " takes ", used,
          " bytes parsed, over the limit of ", max_parsed_bytes));
    }
    *parsed_bytes = used;
    opaque->set_timeout(timeout);
    call = opaque;
  } else if (route.method == nullptr) {
    GRANARY_ASSIGN_OR_RETURN(
        call,
        ReminderCallFromWire(*route.iface, std::move(*request.mutable_key()),
                             request.payload()));
  } else {
    GRANARY_ASSIGN_OR_RETURN(
        call,
        NewCallFromBytes(*route.iface, *route.method,
                         std::move(*request.mutable_key()), request.payload(),
                         timeout, max_parsed_bytes, parsed_bytes));
  }
  call->set_caller_tag(request.id());
  call->set_min_version(
      std::max<uint32_t>({request.min_version(), route.min_version,
                          route.iface != nullptr ? route.iface->version : 0u}));
  // A new chain (the client's is not trusted), unless a silo passes its
  // own on; the trace the caller sent (binary, else text), continued with a
  // new span.
  const TraceContext trace =
      ContinueWireTrace(request.trace(), request.traceparent());
  RequestContext context{
      call->request_context().chain_id, nullptr, std::move(values), trace, {}};
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

// Registered with a channel that ran dry: pumps its stream once an item or
// the end is there. Holds the call and the owner while registered.
class ServedStreams::Wake final : public StreamWaiter {
 public:
  Wake(ServedStreams* streams, uint64_t id, CallBase* call)
      : streams_(streams), id_(id), call_(call) {
    call_->AddRef();
    streams_->owner_->HoldOwner();
  }
  void ReadyUnlocked() override {
    ServedStreams* streams = streams_;
    {
      MutexLock lock(&streams->mu_);
      auto it = streams->served_.find(id_);
      if (it != streams->served_.end() && it->second->call == call_) {
        it->second->waiting = false;
      }
    }
    streams->Pump(id_);
    call_->Release();
    Owner* owner = streams->owner_;
    delete this;
    owner->ReleaseOwner();  // may free `streams`
  }
  // Never registered: lets go (the caller holds the owner).
  void Discard() {
    call_->Release();
    streams_->owner_->ReleaseOwner();
    delete this;
  }

 private:
  ~Wake() = default;
  ServedStreams* const streams_;
  const uint64_t id_;
  CallBase* const call_;
};

ServedStreams::~ServedStreams() {
  for (auto& [id, s] : served_) s->call->Release();
}

bool ServedStreams::Serves(uint64_t id) const {
  MutexLock lock(&mu_);
  return served_.contains(id);
}

void ServedStreams::Add(uint64_t id, CallBase* call, uint32_t window) {
  if (window == 0) window = kDefaultStreamWindow;
  window = std::min(window, kMaxStreamWindow);
  call->AddRef();
  {
    MutexLock lock(&mu_);
    auto [it, fresh] = served_.try_emplace(id);
    if (!fresh) {
      // Refused before (Serves); should one slip through, the old stream
      // loses its entry but not its reference.
      it->second->call->Release();
    } else {
      open_.fetch_add(1, std::memory_order_acq_rel);
    }
    it->second = std::make_unique<Served>(Served{call, window, false, {}});
  }
  Pump(id);
}

void ServedStreams::Grant(uint64_t id, uint32_t n) {
  {
    MutexLock lock(&mu_);
    auto it = served_.find(id);
    if (it == served_.end()) return;  // ended: credit comes late
    Served& s = *it->second;
    s.credit = std::min<int64_t>(s.credit + n, kMaxStreamWindow);
  }
  Pump(id);
}

void ServedStreams::Pumped::Finish(Owner* owner) {
  StreamChannel::Tell(writers);
  if (emitted) owner->ItemsEmitted();
  if (fail != nullptr) {
    fail->Fail(absl::InternalError("a stream item failed to serialize"));
    fail->Release();
  }
  if (ended != nullptr) ended->call->Release();
}

void ServedStreams::Pump(uint64_t id) {
  Pumped done;
  {
    MutexLock lock(&mu_);
    PumpLocked(id, &done);
  }
  done.Finish(owner_);
}

void ServedStreams::PumpLocked(uint64_t id, Pumped* out) {
  auto it = served_.find(id);
  if (it == served_.end()) return;
  Served& s = *it->second;
  std::vector<v1::Reply> items;
  StreamChannel* ch = s.call->stream();
  bool end = false;
  // Room left for items: the owner's, less what `items` already holds
  // (charged only once they are emitted, below).
  int64_t emitting = 0;
  int64_t room = owner_->ItemRoom();
  while (!s.waiting) {
    // A failed stream's items past the credit (or the room) are dropped,
    // not waited for.
    const bool failed = s.final.has_value() && s.final->code() != 0;
    if (!failed && room <= 0 && s.credit > 0) {
      // Unstall pumps again. Bytes released since `room` was read are seen
      // here, or their release's Unstall sees the flag (both seq_cst).
      stalled_.store(true);
      room = owner_->ItemRoom() - emitting;
      if (room <= 0) break;
      continue;
    }
    if (s.credit <= 0 && !failed) {
      if (!s.final.has_value() || ending_.ok()) break;  // Grant pumps again
      // Ended OK, but no credit will come (EndAll): the client learns
      // that it missed items.
      *s.final = ErrorReply(id, ending_);
      continue;
    }
    StreamItem item;
    absl::Status status;
    const StreamChannel::Read r = ch->TryRead(&item, &status, &out->writers);
    if (r == StreamChannel::Read::kEnd) {
      end = s.final.has_value();  // else End comes and pumps again
      break;
    }
    if (r == StreamChannel::Read::kEmpty) {
      auto* wake = new Wake(this, id, s.call);
      s.waiting = true;
      if (ch->WaitReadable(wake)) break;
      s.waiting = false;
      wake->Discard();  // readable already
      continue;
    }
    if (s.credit <= 0 || room <= 0) continue;  // failed: dropped
    v1::Reply& reply = items.emplace_back();
    reply.set_id(id);
    reply.set_item(true);
    if (!item->SerializeToString(reply.mutable_payload())) {
      items.pop_back();
      if (s.final.has_value()) continue;  // ended already: dropped
      out->fail = s.call;                 // failed once the lock is released
      out->fail->AddRef();
      break;
    }
    --s.credit;
    room -= static_cast<int64_t>(ReplyBytes(reply));
    emitting += static_cast<int64_t>(ReplyBytes(reply));
  }
  if (end) {
    items.push_back(std::move(*s.final));
    out->ended = std::move(it->second);
    served_.erase(it);
  }
  if (items.empty()) return;
  owner_->EmitItems(&items);
  out->emitted = true;
  // Only once the final reply is queued: the owner may finish when none
  // is open.
  if (end) open_.fetch_sub(1, std::memory_order_acq_rel);
}

void ServedStreams::Unstall() {
  if (!stalled_.exchange(false)) return;
  std::vector<uint64_t> ids;
  {
    MutexLock lock(&mu_);
    ids.reserve(served_.size());
    for (const auto& [id, s] : served_) ids.push_back(id);
  }
  for (uint64_t id : ids) Pump(id);  // one still without room stalls again
}

bool ServedStreams::End(uint64_t id, CallBase* call, v1::Reply* reply) {
  Pumped done;
  {
    MutexLock lock(&mu_);
    auto it = served_.find(id);
    if (it == served_.end() || it->second->call != call) return false;
    it->second->final = std::move(*reply);
    PumpLocked(id, &done);
  }
  done.Finish(owner_);
  return true;
}

void ServedStreams::EndAll(const absl::Status& status) {
  std::vector<CallBase*> calls;
  std::vector<uint64_t> ended;
  {
    MutexLock lock(&mu_);
    if (ending_.ok()) ending_ = status;
    for (auto& [id, s] : served_) {
      if (s->final.has_value()) {
        ended.push_back(id);  // its items may wait for credit: PumpLocked
      } else {
        s->call->AddRef();
        calls.push_back(s->call);
      }
    }
  }
  for (uint64_t id : ended) Pump(id);
  for (CallBase* call : calls) {
    if (status.code() == absl::StatusCode::kCancelled) {
      call->Cancel();  // the grain's cancellation token fires too
    } else {
      call->Fail(status);
    }
    call->Release();
  }
}

absl::Status CheckStreamRequest(const ServedStreams& served,
                                const v1::Request& request, int max_streams) {
  if (served.Serves(request.id())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request id ", request.id(), " already names an open stream"));
  }
  if (served.open() >= max_streams) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the connection has ", max_streams,
                     " streams open: end one, or open it on another "
                     "connection"));
  }
  return absl::OkStatus();
}

size_t MoveToBatch(std::deque<v1::Reply>* pending, int max_batch_bytes,
                   v1::ReplyBatch* batch) {
  size_t bytes = 0;
  const size_t limit = static_cast<size_t>(max_batch_bytes);
  while (!pending->empty()) {
    const size_t b = ReplyBytes(pending->front());
    if (bytes > 0 && bytes + b > limit) break;
    bytes += b;
    *batch->add_replies() = std::move(pending->front());
    pending->pop_front();
  }
  return bytes;
}

v1::Reply ReplyOfCall(CallBase& call, int max_message_bytes, bool from_silos) {
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
