#include "rpc/gateway_connection.h"

#include <utility>
#include <vector>

#include "core/log.h"
#include "rpc/credentials.h"
#include "rpc/gateway_set.h"
#include "rpc/limits.h"
#include "rpc/status.h"

namespace granary::rpc {
namespace {

// How long a connection waits, after its gateway said it stops, for the
// channel to be seen leaving READY before a READY channel counts as new.
constexpr absl::Duration kAwaitNewConnectionLimit = absl::Seconds(5);

}  // namespace

GatewayConnection::GatewayConnection(GatewaySet* set, std::string address,
                                     const GatewaySetOptions& options)
    : set_(set), address_(std::move(address)), options_(options) {
  grpc::ChannelArguments args;
  ApplyChannelLimits(options.channel, &args);
  args.SetMaxSendMessageSize(
      -1);  // GatewayClientStream checks max_message_bytes
  // Reconnect promptly: the client retries lost gateways on its own period.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A channel of its own per client, so two clients never share a stream.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  channel_ = grpc::CreateCustomChannel(
      address_, MakeChannelCredentials(options.security), args);
  stub_ = v1::Gateway::NewStub(channel_);
}

GatewayConnection::~GatewayConnection() = default;

GatewayClientStream* GatewayConnection::Acquire() {
  MutexLock lock(&mu_);
  if (!up_ || set_->closed()) return nullptr;
  if (stream_ == nullptr) {
    set_->StreamStarted();
    stream_ = new GatewayClientStream(this, options_);
    stream_->Start(stub_.get());
  }
  stream_->Ref();
  return stream_;
}

int GatewayConnection::in_flight() const {
  MutexLock lock(&mu_);
  return stream_ == nullptr ? 0 : stream_->in_flight();
}

void GatewayConnection::TryConnect(absl::Time until) {
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    // The client has its own retry period; skip gRPC's backoff.
    grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
  }
  // Waiting on the channel is what progresses its connection attempt; an
  // attempt that fails waits out the rest of the slice (no busy retry).
  bool await_new;
  absl::Time await_since;
  {
    MutexLock lock(&mu_);
    await_new = await_new_connection_;
    await_since = await_new_since_;
  }
  // A gateway that said it stops keeps its connection open for a while: a
  // READY channel is only good again once that connection has gone.
  while (await_new && state == GRPC_CHANNEL_READY &&
         channel_->WaitForStateChange(state, absl::ToChronoTime(until))) {
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  // Unless the channel was seen to leave READY, or has stayed READY so long
  // that it may well be a new connection made between two looks (a gateway
  // that stopped and came back at once): a stream on a connection that is
  // still the stopping gateway's is told to drain again, and nothing is
  // lost.
  if (await_new && (state != GRPC_CHANNEL_READY ||
                    absl::Now() - await_since > kAwaitNewConnectionLimit)) {
    MutexLock lock(&mu_);
    await_new_connection_ = false;
    await_new = false;
  }
  if (await_new) return;  // still the old connection; try again later
  while (state != GRPC_CHANNEL_READY &&
         channel_->WaitForStateChange(state, absl::ToChronoTime(until))) {
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  if (state == GRPC_CHANNEL_READY) {
    bool was_up;
    {
      MutexLock lock(&mu_);
      was_up = up_.exchange(true);
    }
    if (!was_up) {
      GRANARY_LOG(kInfo) << "client: connected to gateway " << address_;
      set_->Notify();
    }
  }
}

void GatewayConnection::CancelStream(const std::string& why) {
  std::vector<GatewayClientStream*> streams;
  {
    MutexLock lock(&mu_);
    up_.store(false);
    // The current stream and those still draining after a rotation.
    if (stream_ != nullptr) streams.push_back(stream_);
    streams.insert(streams.end(), rotated_.begin(), rotated_.end());
    for (GatewayClientStream* s : streams) s->Ref();
  }
  for (GatewayClientStream* s : streams) {
    s->Cancel(why);
    s->Unref();
  }
}

void GatewayConnection::OnStreamDraining(GatewayClientStream* stream) {
  {
    MutexLock lock(&mu_);
    if (stream_ != stream) return;
    await_new_connection_ = true;
    await_new_since_ = absl::Now();
    if (set_->closed()) return;
    up_.store(false);
    GRANARY_LOG(kInfo) << "client: gateway " << address_
                       << " is shutting down; calls go to other gateways";
  }
  set_->LinkDown();
  set_->Notify();
}

void GatewayConnection::CheckConnection() {
  const bool ready =
      channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
  GatewayClientStream* stream;
  {
    MutexLock lock(&mu_);
    if (!up_ || stream_ == nullptr || set_->closed()) return;
    // A stream counts as on a connection once the channel was READY under
    // it (a stream opened after a GOAWAY waits for the new connection).
    if (ready) {
      stream_connected_ = true;
      return;
    }
    if (!stream_connected_) return;
    stream = stream_;
    stream->Ref();
  }
  if (stream->DrainFromClient()) {
    GRANARY_LOG(kInfo) << "client: gateway " << address_
                       << " closes this connection; calls move to a new one";
  }
  stream->Unref();
}

void GatewayConnection::OnStreamRotated(GatewayClientStream* stream) {
  MutexLock lock(&mu_);
  // The link's reference stays with the stream until its OnStreamDone;
  // until then CancelStream reaches it too.
  if (stream_ == stream) {
    stream_ = nullptr;
    stream_connected_ = false;
    rotated_.insert(stream);
  }
}

void GatewayConnection::OnStreamDone(GatewayClientStream* stream,
                                     const grpc::Status& status,
                                     bool server_stopping) {
  {
    MutexLock lock(&mu_);
    rotated_.erase(stream);
    // (A stream rotated away drained too, but the link is on a new one.)
    if (server_stopping && stream_ == stream && !await_new_connection_) {
      await_new_connection_ = true;
      await_new_since_ = absl::Now();
    }
    if (stream_ == stream) {
      stream_ = nullptr;
      // Any end we did not ask for means the gateway went away or is
      // going: send nothing more here until the channel is connected again.
      // (A gateway that drained the stream said so already.)
      if (!set_->closed()) {
        up_.store(false);
        if (!server_stopping || !status.ok()) {
          GRANARY_LOG(kWarning) << "client: lost gateway " << address_ << ": "
                                << status.error_message();
        }
      }
    }
  }
  stream->Unref();  // the link's
  set_->LinkDown();
  set_->Notify();
}

void GatewayConnection::StreamGone() { set_->StreamGone(); }

void GatewayConnection::Notify() { set_->Notify(); }

void GatewayConnection::Resend(CallBase* call) { set_->Invoke(call); }

bool GatewayConnection::closed() const { return set_->closed(); }

absl::StatusOr<v1::MembershipView> GatewayConnection::FetchCluster(
    absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  AddCallToken(&context, options_.security);
  v1::MembershipView view;
  grpc::Status s = stub_->Cluster(&context, v1::ClusterRequest(), &view);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        s.error_message());
  }
  return view;
}

}  // namespace granary::rpc
