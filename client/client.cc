#include "client/client.h"

#include <utility>

#include "rpc/gateway_set.h"

namespace granary {

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  rpc::GatewaySetOptions set;
  static_cast<rpc::GatewayOptions&>(set) = std::move(options);
  set.closed_code = absl::StatusCode::kFailedPrecondition;
  absl::StatusOr<std::unique_ptr<rpc::GatewaySet>> gateways =
      rpc::GatewaySet::Connect(std::move(set));
  if (!gateways.ok()) return gateways.status();
  return std::unique_ptr<Client>(new Client(*std::move(gateways)));
}

Client::Client(std::unique_ptr<rpc::GatewaySet> gateways)
    : gateways_(std::move(gateways)) {}

Client::~Client() = default;

void Client::Register(const InterfaceInfo& iface) {
  gateways_->Register(iface);
}

void Client::Invoke(CallBase* call) { gateways_->Invoke(call); }

absl::Status Client::WaitForConnected(absl::Duration timeout) {
  return gateways_->WaitForConnected(timeout);
}

int Client::connected_gateways() const { return gateways_->connected(); }

std::vector<std::string> Client::gateways() const {
  return gateways_->gateways();
}

int Client::in_flight() const { return gateways_->in_flight(); }

void Client::Close(absl::Duration timeout) { gateways_->Close(timeout); }

}  // namespace granary
