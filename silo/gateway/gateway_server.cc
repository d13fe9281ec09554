#include "silo/gateway/gateway_server.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "core/log.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/codegen/service_type.h"
#include "rpc/callback_queue.h"
#include "rpc/credentials.h"
#include "silo/gateway/gateway_service.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

GatewayServer::GatewayServer(Runtime* silo, std::string address,
                             int max_message_bytes, int max_in_flight)
    : silo_(silo),
      requested_address_(std::move(address)),
      max_message_bytes_(max_message_bytes),
      max_in_flight_(max_in_flight) {}

int GatewayServer::open_streams() const {
  return gateway_ == nullptr ? 0 : gateway_->open_streams();
}

GatewayServer::~GatewayServer() { Stop(); }

absl::Status GatewayServer::Start() {
  if (server_ != nullptr) {
    return absl::FailedPreconditionError("gateway already started");
  }
  if (max_message_bytes_ < 1) {
    return absl::InvalidArgumentError("max_message_bytes must be positive");
  }
  if (max_in_flight_ < 1) {
    return absl::InvalidArgumentError("max_in_flight must be positive");
  }
  std::string host;
  int requested_port = 0;
  if (!SplitHostPort(requested_address_, &host, &requested_port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gateway address '", requested_address_, "' is not HOST:PORT"));
  }
  rpc::HoldGrpcCallbackQueue();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second silo on the same port would
  // start and silently take half the connections. Refuse the port instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Only reflection is served synchronously; one polling thread is plenty
  // for it. (By default gRPC starts one per core, and every poller also
  // takes turns at the gateway's network events, adding wake-ups.)
  builder.SetSyncServerOption(grpc::ServerBuilder::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::MAX_POLLERS, 1);
  limits_.max_message_bytes = max_message_bytes_;
  rpc::ApplyServerLimits(limits_, &builder);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      rpc::MakeServerCredentials(security_, refused_);
  if (!credentials.ok()) return credentials.status();
  builder.AddListeningPort(requested_address_, *credentials, &port_);
  GatewayServiceOptions gateway_options;
  gateway_options.max_in_flight = max_in_flight_;
  gateway_options.max_connection_bytes = max_connection_bytes_;
  gateway_options.max_streams = max_streams_;
  gateway_options.max_message_bytes = max_message_bytes_;
  gateway_options.max_batch_bytes = std::min(1 << 20, max_message_bytes_ / 2);
  gateway_options.cluster_view = cluster_view_;
  gateway_ = std::make_unique<GatewayService>(silo_, gateway_options);
  builder.RegisterService(gateway_->grpc_service());
  for (const GrainClassInfo* info : silo_->KnownTypes()) {
    services_.push_back(info->new_grpc_service(silo_));
    builder.RegisterService(services_.back().get());
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    services_.clear();
    gateway_.reset();
    return absl::UnavailableError(
        absl::StrCat("gateway could not listen on ", requested_address_));
  }
  bound_address_ = absl::StrCat(host, ":", port_);
  gateway_->set_address(bound_address_);
  GRANARY_LOG(kInfo) << "silo=" << silo_->name()
                     << " gateway=" << bound_address_
                     << " tls=" << (security_.tls() ? "on" : "off")
                     << " client_certs="
                     << (security_.client_ca_file.empty() ? "off" : "required")
                     << " tokens="
                     << (security_.tokens_file.empty() ? "off" : "required")
                     << " gateway listening";
  return absl::OkStatus();
}

void GatewayServer::Stop(absl::Duration grace) {
  if (server_ == nullptr) return;
  const absl::Time until = absl::Now() + grace;
  // Clients of the gateway protocol are told to go elsewhere; each sends
  // what it queued here, half-closes, and its stream ends with OK once
  // answered. Half the grace period is theirs.
  gateway_->Drain();
  (void)gateway_->WaitForStreamsClosed(grace / 2);
  // Streams still open (a client that did not half-close) finish
  // (UNAVAILABLE) as soon as the replies of their accepted calls are
  // written.
  gateway_->Stop();
  // Calls still open after the grace period are cancelled. With a lone
  // silo stopped first they have all been answered; what remains is idle
  // client connections, which an unbounded shutdown would wait on.
  server_->Shutdown(absl::ToChronoTime(std::max(until, absl::Now())));
  server_->Wait();
  server_.reset();
  services_.clear();
  gateway_.reset();
}

}  // namespace granary::silo
