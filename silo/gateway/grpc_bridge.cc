#include "silo/gateway/grpc_bridge.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/parsed_size.h"
#include "core/status.h"
#include "core/stream.h"
#include "core/sync.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "rpc/credentials.h"
#include "rpc/status.h"
#include "silo/gateway/gateway_call.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {
namespace {

void SetBytes(const std::string& bytes, grpc::ByteBuffer* out) {
  grpc::Slice slice(bytes);
  *out = grpc::ByteBuffer(&slice, 1);
}

// One call the bridge started: gRPC's reactor for it, charged to the
// silo's budget until it ends. References: gRPC's (until OnDone) and the
// call's done callback; the last deletes it. A client's cancellation
// cancels the grain call (core/cancel.h).
class BridgeCall final : public grpc::ServerUnaryReactor {
 public:
  BridgeCall(CallBase* call, grpc::ByteBuffer* response, MemoryBudget* budget,
             int64_t bytes)
      : call_(call), response_(response), budget_(budget), bytes_(bytes) {
    call_->AddRef();
  }

  // The call is set up, and handed to the silo after this. gRPC orders
  // OnCancel after the handler returns, but inside its uninstrumented core;
  // mu_ shows ThreadSanitizer that order.
  void Publish() { MutexLock lock(&mu_); }
  void OnCancel() override {
    { MutexLock lock(&mu_); }
    call_->Cancel();
  }
  void OnDone() override { Unref(); }

  // A one-way call is answered once its turn ran, so a caller that waits
  // for its answers is paced by the grain (and its open calls, bounded by
  // the server's streams per connection, are all gRPC holds for it).
  static void Done(void* ctx, CallBase* call) {
    auto* self = static_cast<BridgeCall*>(ctx);
    self->Finish(self->Answer(*call));
    self->Unref();
  }

 private:
  ~BridgeCall() override {
    if (budget_ != nullptr) budget_->Release(bytes_);
    call_->Release();
  }

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  grpc::Status Answer(CallBase& call) {
    if (!call.status().ok()) return rpc::ToGrpc(call.status());
    std::string bytes;  // empty: google.protobuf.Empty of a one-way call
    if (!call.one_way() && !call.reply().SerializeToString(&bytes)) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          "reply failed to serialize");
    }
    SetBytes(bytes, response_);
    return grpc::Status::OK;
  }

  CallBase* const call_;
  grpc::ByteBuffer* const response_;
  MemoryBudget* const budget_;  // null: the invoker is no silo
  const int64_t bytes_;
  std::atomic<int> refs_{2};
  Mutex mu_;
};

// One server-streaming call the bridge started: writes the stream's items
// as they come, one write out at a time (gRPC's flow control then holds
// the grain back through the stream's bounded buffer), and finishes with
// the stream's end status. References: gRPC's (until OnDone) and one while
// it waits for the channel; the last deletes it.
class BridgeStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                           public StreamWaiter {
 public:
  BridgeStream(CallBase* call, MemoryBudget* budget, int64_t bytes)
      : call_(call), budget_(budget), bytes_(bytes) {
    call_->AddRef();
  }

  // Once the call is handed to the silo: writes what is there.
  void Begin() { Pump(); }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      {
        MutexLock lock(&mu_);
        broken_ = true;
        writing_ = false;
      }
      call_->Cancel();  // the client is gone: the grain's writes fail
    } else {
      MutexLock lock(&mu_);
      writing_ = false;
    }
    Pump();
  }
  void OnCancel() override {
    { MutexLock lock(&mu_); }
    call_->Cancel();
  }
  void OnDone() override { Unref(); }

  bool ReadyLocked() override { return true; }
  void ReadyUnlocked() override {
    {
      MutexLock lock(&mu_);
      waiting_ = false;
    }
    Pump();
    Unref();  // the wait's
  }

 private:
  ~BridgeStream() override {
    if (budget_ != nullptr) budget_->Release(bytes_);
    call_->Release();
  }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Starts the next write, the finish, or a wait for the channel; then
  // tells the writers waiting for the room it made.
  void Pump() {
    std::vector<StreamWaiter*> writers;
    {
      MutexLock lock(&mu_);
      PumpLocked(&writers);
    }
    StreamChannel::Tell(writers);
  }

  void PumpLocked(std::vector<StreamWaiter*>* writers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    StreamChannel* ch = call_->stream();
    while (!writing_ && !finished_ && !waiting_) {
      if (broken_) {
        finished_ = true;
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
        return;
      }
      StreamItem item;
      absl::Status end;
      switch (ch->TryRead(&item, &end, writers)) {
        case StreamChannel::Read::kItem: {
          std::string bytes;
          if (!item->SerializeToString(&bytes)) {
            finished_ = true;
            call_->Fail(absl::InternalError("stream item failed to serialize"));
            Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                                "stream item failed to serialize"));
            return;
          }
          SetBytes(bytes, &out_);
          writing_ = true;
          StartWrite(&out_);
          return;
        }
        case StreamChannel::Read::kEnd:
          finished_ = true;
          Finish(rpc::ToGrpc(end));
          return;
        case StreamChannel::Read::kEmpty:
          refs_.fetch_add(1, std::memory_order_relaxed);  // the wait's
          waiting_ = true;
          if (ch->WaitReadable(this)) return;
          waiting_ = false;  // readable already
          refs_.fetch_sub(1, std::memory_order_relaxed);
          break;
      }
    }
  }

  CallBase* const call_;
  MemoryBudget* const budget_;
  const int64_t bytes_;
  std::atomic<int> refs_{1};
  Mutex mu_;
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// What ServeUnary and ServeServerStream do before the call is sent: checks
// the silo's budget, builds the call from the request and its metadata.
struct Prepared {
  CallBase* call = nullptr;
  grpc::Status refusal;
  MemoryBudget* budget = nullptr;
  int64_t bytes = 0;
};

Prepared PrepareCall(CallInvoker* invoker, grpc::CallbackServerContext* context,
                     const InterfaceInfo& iface, uint32_t method,
                     const grpc::ByteBuffer* request) {
  Prepared p;
  const MethodInfo& info = iface.methods[method];
  auto* silo = dynamic_cast<Runtime*>(invoker);
  p.budget = silo != nullptr ? &silo->internals().remote_memory() : nullptr;
  if (p.budget != nullptr && p.budget->Over()) {
    silo->internals().metrics().refused_over_budget->Inc();
    p.refusal = grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "the silo holds as many remote calls as its --silo_memory_budget "
        "allows: retry later");
    return p;
  }
  const auto& metadata = context->client_metadata();
  auto key_it = metadata.find(kGrainKeyMetadata);
  // A stream has no deadline unless its client set one.
  absl::Duration timeout =
      info.server_streaming ? absl::InfiniteDuration() : kDefaultCallTimeout;
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    timeout = absl::FromChrono(context->deadline()) - absl::Now();
  }
  int64_t parsed = request->Length();
  absl::StatusOr<CallBase*> made = UnaryCallFromWire(
      iface, method, key_it == metadata.end() ? nullptr : &key_it->second,
      timeout, request, &parsed);
  if (!made.ok()) {
    p.refusal = rpc::ToGrpc(made.status());
    return p;
  }
  CallBase* call = *made;
  RequestContext call_context;
  call_context.chain_id = call->request_context().chain_id;
  if (absl::Status s = ContextFromMetadata(metadata, &call_context); !s.ok()) {
    call->Release();
    p.refusal = rpc::ToGrpc(s);
    return p;
  }
  if (std::string caller = rpc::CallerIdentity(*context); !caller.empty()) {
    call_context.caller =
        std::make_shared<const std::string>(std::move(caller));
  }
  call->set_request_context(std::move(call_context));
  GRANARY_LOG_CALL_ACCEPTED(*call, info.full_name, "grpc");
  // Charged what the request holds parsed, not its wire bytes.
  p.bytes = 256 + static_cast<int64_t>(call->target().key().size()) +
            std::max<int64_t>(parsed, request->Length());
  if (p.budget != nullptr) p.budget->Charge(p.bytes);
  p.call = call;
  return p;
}

}  // namespace

absl::Status ContextFromMetadata(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    RequestContext* context) {
  constexpr absl::string_view kPrefix = kContextMetadataPrefix;
  ContextMap entries;
  absl::string_view traceparent;
  for (const auto& [k, v] : metadata) {
    const absl::string_view key(k.data(), k.size());
    if (key == kTraceparentMetadata) {
      traceparent = absl::string_view(v.data(), v.size());
    } else if (key.size() > kPrefix.size() &&
               key.substr(0, kPrefix.size()) == kPrefix) {
      if (entries.size() == kMaxContextEntries) {
        return absl::InvalidArgumentError(absl::StrCat(
            "more than ", kMaxContextEntries, " request context entries (",
            kContextMetadataPrefix, "*)"));
      }
      entries.emplace_back(std::string(key.substr(kPrefix.size())),
                           std::string(v.data(), v.size()));
    }
  }
  GRANARY_ASSIGN_OR_RETURN(context->values,
                           MakeContextValues(std::move(entries)));
  context->trace = ContinueTrace(traceparent);
  return absl::OkStatus();
}

absl::StatusOr<CallBase*> UnaryCallFromWire(const InterfaceInfo& iface,
                                            uint32_t method,
                                            const grpc::string_ref* key,
                                            absl::Duration timeout,
                                            const grpc::ByteBuffer* request,
                                            int64_t* parsed_bytes) {
  if (key == nullptr || key->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing metadata '", kGrainKeyMetadata,
                     "': the key of the ", iface.type_name, " grain to call"));
  }
  std::string grain_key(key->data(), key->size());
  GRANARY_RETURN_IF_ERROR(ValidateGrainKey(grain_key));
  if (timeout <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(
        "deadline passed before the call started");
  }
  grpc::Slice whole;
  if (request == nullptr || !request->DumpToSingleSlice(&whole).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request of ", iface.methods[method].full_name, " cannot be read"));
  }
  const absl::string_view payload(reinterpret_cast<const char*>(whole.begin()),
                                  whole.size());
  // As the gateway's limit at the default --max_message_bytes, or four
  // times a larger request.
  const int64_t limit =
      std::max<int64_t>(MaxParsedBytes(4 << 20),
                        int64_t{4} * static_cast<int64_t>(payload.size()));
  return NewCallFromBytes(iface, iface.methods[method], std::move(grain_key),
                          payload, timeout, limit, parsed_bytes);
}

grpc::ServerUnaryReactor* ServeUnary(CallInvoker* invoker,
                                     grpc::CallbackServerContext* context,
                                     const InterfaceInfo& iface,
                                     uint32_t method,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) {
  Prepared p = PrepareCall(invoker, context, iface, method, request);
  if (p.call == nullptr) {
    // gRPC's default reactor answers a call refused before it starts.
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(p.refusal);
    return reactor;
  }
  auto* bridge = new BridgeCall(p.call, response, p.budget, p.bytes);
  p.call->SetDoneCallback(&BridgeCall::Done, bridge);
  bridge->Publish();
  invoker->Invoke(p.call);
  return bridge;
}

namespace {

// A stream refused before it starts.
class RefusedWrite final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RefusedWrite(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* ServeServerStream(
    CallInvoker* invoker, grpc::CallbackServerContext* context,
    const InterfaceInfo& iface, uint32_t method,
    const grpc::ByteBuffer* request) {
  Prepared p = PrepareCall(invoker, context, iface, method, request);
  if (p.call == nullptr) return new RefusedWrite(p.refusal);
  auto* bridge = new BridgeStream(p.call, p.budget, p.bytes);
  invoker->Invoke(p.call);  // takes the call's reference
  bridge->Begin();
  return bridge;
}

}  // namespace granary::silo
