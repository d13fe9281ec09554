#include "silo/gateway_server.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "core/log.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/codegen/service_type.h"
#include "silo/silo.h"

namespace granary::silo {

GatewayServer::GatewayServer(Silo* silo, std::string address,
                             int max_message_bytes)
    : silo_(silo),
      requested_address_(std::move(address)),
      max_message_bytes_(max_message_bytes) {}

GatewayServer::~GatewayServer() { Stop(); }

absl::Status GatewayServer::Start() {
  if (server_ != nullptr) {
    return absl::FailedPreconditionError("gateway already started");
  }
  if (max_message_bytes_ < 1) {
    return absl::InvalidArgumentError("max_message_bytes must be positive");
  }
  std::string host;
  int requested_port = 0;
  if (!SplitHostPort(requested_address_, &host, &requested_port)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gateway address '", requested_address_, "' is not HOST:PORT"));
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second silo on the same port would
  // start and silently take half the connections. Refuse the port instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(max_message_bytes_);
  builder.SetMaxSendMessageSize(max_message_bytes_);
  builder.AddListeningPort(requested_address_, grpc::InsecureServerCredentials(),
                           &port_);
  for (const GrainClassInfo* info : silo_->GrainTypes()) {
    services_.push_back(info->new_grpc_service(silo_));
    builder.RegisterService(services_.back().get());
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    services_.clear();
    return absl::UnavailableError(
        absl::StrCat("gateway could not listen on ", requested_address_));
  }
  bound_address_ = absl::StrCat(host, ":", port_);
  GRANARY_LOG(kInfo) << "silo=" << silo_->name() << " gateway listening on "
                     << bound_address_;
  return absl::OkStatus();
}

void GatewayServer::Stop() {
  if (server_ == nullptr) return;
  // Calls still open after the grace period are cancelled. With the silo
  // stopped first they have all been answered; what remains is idle client
  // connections, which an unbounded shutdown would wait on for seconds.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  server_->Wait();
  server_.reset();
  services_.clear();
}

}  // namespace granary::silo
