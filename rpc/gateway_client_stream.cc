#include "rpc/gateway_client_stream.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/stream.h"
#include "rpc/gateway_connection.h"
#include "rpc/gateway_set.h"

namespace granary::rpc {
namespace {

thread_local bool on_network_thread = false;

// Grants the gateway credit for a streaming call as its consumer reads:
// half a window at a time.
class CreditHook final : public StreamChannel::ReadHook {
 public:
  CreditHook(GatewayClientStream* stream, uint64_t id, uint32_t window)
      : stream_(stream), id_(id), batch_(std::max<uint32_t>(1, window / 2)) {
    stream_->Ref();
  }
  ~CreditHook() override { stream_->Unref(); }
  void OnRead() override {
    if (++unacked_ >= batch_)
      stream_->GrantCredit(id_, std::exchange(unacked_, 0));
  }

 private:
  GatewayClientStream* const stream_;
  const uint64_t id_;
  const uint32_t batch_;
  uint32_t unacked_ = 0;  // under the channel's lock
};

}  // namespace

bool OnNetworkThread() { return on_network_thread; }
void MarkNetworkThread() { on_network_thread = true; }

NetworkThreadScope::NetworkThreadScope()
    : saved_(std::exchange(on_network_thread, true)) {}
NetworkThreadScope::~NetworkThreadScope() { on_network_thread = saved_; }

absl::Status GatewayClientStream::Send(v1::Request& request, CallBase* call) {
  uint64_t id = 0;
  if (call != nullptr) {
    // Set before the call can be answered (once in waiting_), and never
    // under mu_: a cancel holds the call's lock while it takes mu_.
    id = next_id_.fetch_add(1, std::memory_order_relaxed);
    Ref();  // the forwarder's
    if (!call->SetForwarder(this, id)) {
      Unref();
      call->Release();  // cancelled already: its caller has its answer
      return absl::OkStatus();
    }
  }
  if (call != nullptr && call->stream() != nullptr) {
    StreamChannel* ch = call->stream();
    request.set_stream_window(ch->capacity());
    ch->SetReadHook(std::make_unique<CreditHook>(this, id, ch->capacity()));
  }
  absl::Status refused = Enqueue(request, call, id);
  if (!refused.ok() && call != nullptr) Forget(call);
  return refused;
}

void GatewayClientStream::ForwardCancel(uint64_t id) {
  Actions actions;
  {
    MutexLock lock(&mu_);
    // Half-closed (write_hold_ gone): nothing more can be written.
    if (dead_ || !write_hold_ || !waiting_.contains(id)) return;
    cancels_.push_back(id);
    actions = AdvanceLocked();
  }
  Act(actions);
}

void GatewayClientStream::GrantCredit(uint64_t id, uint32_t n) {
  Actions actions;
  {
    MutexLock lock(&mu_);
    if (dead_ || !write_hold_ || !waiting_.contains(id)) return;
    credits_.emplace_back(id, n);
    actions = AdvanceLocked();
  }
  Act(actions);
}

bool GatewayClientStream::DrainFromClient() {
  Actions actions;
  {
    MutexLock lock(&mu_);
    if (draining_ || dead_) return false;
    draining_ = true;
    space_.SignalAll();
    actions = AdvanceLocked();
  }
  // The link lets go first: the half-close below may end the stream at
  // once, and its end must not take the link down.
  link_->OnStreamRotated(this);
  Act(actions);
  return true;
}

absl::Status GatewayClientStream::Enqueue(v1::Request& request, CallBase* call,
                                          uint64_t id) {
  Actions actions;
  {
    MutexLock lock(&mu_);
    while (!dead_ && !draining_ && in_flight_ >= max_in_flight_) {
      if (overflow_ == GatewaySetOptions::Overflow::kFail ||
          OnNetworkThread()) {
        return absl::ResourceExhaustedError(
            absl::StrCat(max_in_flight_, " calls already in flight to gateway ",
                         link_->address()));
      }
      space_.Wait(&mu_);
    }
    if (dead_ && !done_ && call != nullptr) {
      // The stream failed but its status is not in yet (a refused token
      // ends it so): the call waits for it and fails, or moves to another
      // gateway, as the calls sent before did. Nothing is written.
      request.set_id(id);
      waiting_.emplace(id, call);
      unsent_.insert(id);
      return absl::OkStatus();
    }
    if (dead_) {
      if (!refusal_.ok()) return refusal_;
      return absl::UnavailableError(absl::StrCat(
          "connection to gateway ", link_->address(), " was lost"));
    }
    if (draining_) {
      // Not sent: the caller tries another gateway.
      return absl::UnavailableError(
          absl::StrCat("gateway ", link_->address(), " is shutting down"));
    }
    // An open stream is not a call in flight: it may stay open for good
    // (the gateway bounds them apart).
    if (call == nullptr || call->stream() == nullptr) ++in_flight_;
    if (call != nullptr) {
      request.set_id(id);
      waiting_.emplace(id, call);
      // A cancel between SetForwarder and here found no id to send.
      if (call->cancelled()) cancels_.push_back(id);
    } else {
      ++pending_one_way_;
    }
    pending_.push_back(std::move(request));
    actions = AdvanceLocked();
  }
  Act(actions);
  return absl::OkStatus();
}

GatewayClientStream::Actions GatewayClientStream::AdvanceLocked() {
  Actions actions;
  if (write_out_ || !write_hold_) return actions;
  if (dead_) {
    write_hold_ = false;
    actions.remove_hold = true;
  } else if (!pending_.empty() || !cancels_.empty() || !credits_.empty()) {
    size_t bytes = 0;
    int one_way = 0;
    while (!pending_.empty()) {
      const size_t b = RequestBytes(pending_.front());
      if (bytes > 0 && bytes + b > max_batch_bytes_) break;
      bytes += b;
      if (pending_.front().id() == 0) ++one_way;
      *writing_.add_requests() = std::move(pending_.front());
      pending_.pop_front();
    }
    // A cancel follows the request it names: held back while that is
    // still queued.
    if (!cancels_.empty()) {
      absl::flat_hash_set<uint64_t> queued;
      for (const v1::Request& r : pending_) queued.insert(r.id());
      size_t kept = 0;
      for (uint64_t id : cancels_) {
        if (queued.contains(id)) {
          cancels_[kept++] = id;
        } else {
          writing_.add_cancels(id);
        }
      }
      cancels_.resize(kept);
    }
    for (const auto& [id, n] : credits_) {
      v1::StreamCredit* c = writing_.add_credits();
      c->set_id(id);
      c->set_n(n);
    }
    credits_.clear();
    pending_one_way_ -= one_way;
    writing_one_way_ = one_way;
    write_out_ = true;
    actions.write = true;
  } else if (draining_) {
    // Everything queued here is written: the gateway may end the stream.
    write_hold_ = false;
    actions.writes_done = true;
    actions.remove_hold = true;
  }
  return actions;
}

void GatewayClientStream::Act(Actions actions) {
  if (actions.write) StartWrite(&writing_);
  if (actions.writes_done) StartWritesDone();
  if (actions.remove_hold) RemoveHold();
}

void GatewayClientStream::Advance() {
  Actions actions;
  {
    MutexLock lock(&mu_);
    actions = AdvanceLocked();
  }
  Act(actions);
}

void GatewayClientStream::OnWriteDone(bool ok) {
  {
    MutexLock lock(&mu_);
    write_out_ = false;
    writing_.Clear();
    // One-way calls are done with once written.
    in_flight_ -= writing_one_way_;
    writing_one_way_ = 0;
    if (!ok) dead_ = true;
    space_.SignalAll();
  }
  Advance();
  link_->Notify();
}

void GatewayClientStream::Finish(CallBase* call, const v1::Reply& reply) {
  Forget(call);
  if (!reply.host_gateway().empty()) {
    link_->set()->RememberLocation(call->target(), reply.host_gateway());
  }
  if (call->TryClaim()) {
    absl::Status status;
    if (reply.code() != 0) {
      status = absl::Status(static_cast<absl::StatusCode>(reply.code()),
                            reply.message());
    } else if (!call->reply().ParseFromString(reply.payload())) {
      status = absl::InternalError(
          absl::StrCat("reply from ", call->target().ToString(),
                       " is not a valid ", call->reply().GetTypeName()));
    }
    call->Deliver(std::move(status));
  }
  call->Release();
}

void GatewayClientStream::PushItem(CallBase* call, const v1::Reply& reply) {
  StreamChannel* ch = call->stream();
  if (ch == nullptr) return;  // not a stream: ignored
  std::unique_ptr<google::protobuf::Message> item(ch->prototype().New());
  if (!item->ParseFromString(reply.payload())) {
    call->Fail(absl::InternalError(
        absl::StrCat("stream item from ", call->target().ToString(),
                     " is not a valid ", ch->prototype().GetTypeName())));
    call->Cancel();
    return;
  }
  absl::Status pushed = ch->TryPush(StreamItem(std::move(item)));
  if (absl::IsResourceExhausted(pushed)) {
    call->Fail(absl::InternalError(
        absl::StrCat("gateway ", link_->address(),
                     " sent more stream items than the client granted")));
    call->Cancel();
  }
  // Otherwise queued, or the stream ended here already: dropped.
}

void GatewayClientStream::OnReadDone(bool ok) {
  if (!ok) {
    {
      MutexLock lock(&mu_);
      dead_ = true;
      space_.SignalAll();
    }
    Advance();  // removes the write hold once no write is out
    return;
  }
  NetworkThreadScope network;
  // Claim this batch's calls under one lock, then finish them outside it.
  std::vector<std::pair<CallBase*, const v1::Reply*>> ready;
  ready.reserve(incoming_.replies_size());
  bool told_to_drain = false;
  {
    MutexLock lock(&mu_);
    if (incoming_.draining() && !draining_) {
      // The gateway is going: what is queued here is still written, then
      // the stream is half-closed; new calls go elsewhere.
      draining_ = true;
      told_to_drain = true;
      space_.SignalAll();
    }
    int finished = 0;
    for (const v1::Reply& reply : incoming_.replies()) {
      auto it = waiting_.find(reply.id());
      if (it == waiting_.end()) continue;  // not ours: ignore
      if (reply.item()) {
        it->second->AddRef();  // the item's, until pushed
        ready.emplace_back(it->second, &reply);
        continue;
      }
      ready.emplace_back(it->second, &reply);
      if (it->second->stream() == nullptr) ++finished;
      waiting_.erase(it);
    }
    in_flight_ -= finished;
    space_.SignalAll();
  }
  // Before the calls finish: what their continuations send goes elsewhere.
  if (told_to_drain) link_->OnStreamDraining(this);
  // Finishing resumes awaiting coroutines here, on this network thread.
  // In order: a stream's items before its end.
  for (auto& [call, reply] : ready) {
    if (reply->item()) {
      PushItem(call, *reply);
      call->Release();
    } else {
      Finish(call, *reply);
    }
  }
  incoming_.Clear();
  StartRead(&incoming_);
  if (told_to_drain) Advance();  // half-closes at once when nothing is queued
  link_->Notify();
}

void GatewayClientStream::OnDone(const grpc::Status& status) {
  NetworkThreadScope network;
  absl::flat_hash_map<uint64_t, CallBase*> waiting;
  absl::flat_hash_set<uint64_t> unsent;
  std::string why;
  bool drained;
  // A gateway that refused the client's credentials refuses them again:
  // the calls fail with its answer, not as if it were unreachable.
  const bool refused =
      status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
      status.error_code() == grpc::StatusCode::PERMISSION_DENIED;
  {
    MutexLock lock(&mu_);
    dead_ = true;
    done_ = true;
    if (refused) {
      refusal_ =
          absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                       status.error_message());
    }
    waiting.swap(waiting_);
    unsent.swap(unsent_);
    pending_.clear();
    cancels_.clear();
    credits_.clear();
    in_flight_ = 0;
    why = cancel_reason_;
    drained = draining_;
    space_.SignalAll();
  }
  if (why.empty()) {
    why = absl::StrCat("connection to gateway ", link_->address(),
                       " was lost: ", status.error_message());
  }
  const auto& trailers = context_.GetServerTrailingMetadata();
  const bool stopping =
      trailers.find("granary-gateway-stopping") != trailers.end();
  // gRPC's answer when no connection could be made for the stream at all:
  // nothing of it reached the gateway either.
  const bool never_connected =
      status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      absl::StrContains(status.error_message(),
                        "failed to connect to all addresses");
  const bool resend = (stopping || never_connected) && !link_->closed();
  for (auto& [id, call] : waiting) Forget(call);
  std::vector<CallBase*> again;
  for (auto& [id, call] : waiting) {
    // A stopping gateway answers every request it read before it ends the
    // stream, so these never reached it, nor did those never written here
    // (but a gateway that refused the credentials refuses them too).
    if (resend || (!refused && unsent.contains(id) && !link_->closed())) {
      again.push_back(call);
      continue;
    }
    call->Fail(refused ? absl::Status(
                             static_cast<absl::StatusCode>(status.error_code()),
                             status.error_message())
                       : absl::UnavailableError(why));
    call->Release();
  }
  link_->OnStreamDone(this, status, stopping || drained);
  // To another gateway (without waiting for room: this is a network thread).
  for (CallBase* call : again) link_->Resend(call);
  link_->StreamGone();  // last use of the link: Close may now free the client
  Unref();              // gRPC's
}

}  // namespace granary::rpc
