#include "silo/gateway_server.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/codegen/service_type.h"
#include "silo/silo.h"

namespace granary::silo {
namespace {

// HOST:PORT with a numeric port in [0, 65535]; [v6]:PORT accepted.
bool ValidAddress(const std::string& address, std::string* host) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port)) return false;
  if (port < 0 || port > 65535) return false;
  *host = address.substr(0, colon);
  return true;
}

}  // namespace

GatewayServer::GatewayServer(Silo* silo, std::string address)
    : silo_(silo), requested_address_(std::move(address)) {}

GatewayServer::~GatewayServer() { Stop(); }

absl::Status GatewayServer::Start() {
  if (server_ != nullptr) {
    return absl::FailedPreconditionError("gateway already started");
  }
  std::string host;
  if (!ValidAddress(requested_address_, &host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gateway address '", requested_address_, "' is not HOST:PORT"));
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
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
  server_->Shutdown();
  server_->Wait();
  server_.reset();
  services_.clear();
}

}  // namespace granary::silo
