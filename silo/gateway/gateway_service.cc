#include "silo/gateway/gateway_service.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/metrics.h"
#include "core/sync.h"
#include "silo/gateway/gateway_server_stream.h"
#include "silo/gateway/gateway_service_impl.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
GatewayService::Impl::Connect(grpc::CallbackServerContext* context) {
  Runtime* silo = this->silo();
  if (silo == nullptr) {
    return new RefusedStream(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "silo starting"));
  }
  GatewayServerStream* stream;
  {
    MutexLock lock(&mu_);
    if (options_.max_streams > 0 &&
        streams_.size() >= static_cast<size_t>(options_.max_streams)) {
      silo->internals().metrics().streams_refused->Inc();
      return new RefusedStream(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the gateway has ", options_.max_streams,
                       " streams open (--max_gateway_streams): retry later "
                       "or on another gateway")));
    }
    stream = new GatewayServerStream(this, context, stopping_, draining_);
    streams_.insert(stream);
    silo->internals().metrics().gateway_connections->Add(1);
  }
  stream->Begin();
  return stream;
}

void GatewayService::Impl::Drain() {
  SetAndTellStreams(&draining_, &GatewayServerStream::Drain);
}

void GatewayService::Impl::Stop() {
  SetAndTellStreams(&stopping_, &GatewayServerStream::Stop);
}

void GatewayService::Impl::SetAndTellStreams(
    bool* flag, void (GatewayServerStream::*tell)()) {
  std::vector<GatewayServerStream*> streams;
  {
    MutexLock lock(&mu_);
    *flag = true;  // streams that connect from now on start that way
    for (GatewayServerStream* s : streams_) {
      s->Ref();
      streams.push_back(s);
    }
  }
  for (GatewayServerStream* s : streams) {
    (s->*tell)();
    s->Unref();
  }
}

}  // namespace granary::silo
