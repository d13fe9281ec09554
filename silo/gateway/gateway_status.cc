// The gateway's unary calls: Status (the silo and its grain types, for the
// CLI) and Cluster (the membership, for clients learning the gateways); and
// GatewayService, the façade over its Impl.
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "core/metrics.h"
#include "core/version.h"
#include "google/protobuf/descriptor.h"
#include "silo/gateway/gateway_service_impl.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {
namespace {

grpc::ServerUnaryReactor* Starting(grpc::CallbackServerContext* context) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "silo starting"));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* GatewayService::Impl::Status(
    grpc::CallbackServerContext* context, const v1::StatusRequest*,
    v1::SiloStatus* reply) {
  Runtime* const silo = this->silo();
  if (silo == nullptr) return Starting(context);
  const absl::Time now = absl::Now();
  reply->set_name(silo->name());
  reply->set_gateway(address());
  reply->set_start_time_unix_ms(absl::ToUnixMillis(started_));
  reply->set_uptime_ms(absl::ToInt64Milliseconds(now - started_));
  reply->set_activations(static_cast<int64_t>(silo->ActivationCount()));
  reply->set_activated_total(
      static_cast<int64_t>(silo->internals().activated()));
  reply->set_deactivated_total(
      static_cast<int64_t>(silo->internals().deactivated()));
  reply->set_max_in_flight(options_.max_in_flight);
  reply->set_resident_bytes(metrics::ResidentBytes());
  reply->set_version(kVersion);
  for (const GrainClassInfo* info : silo->GrainTypes()) {
    const InterfaceInfo& iface = *info->interface;
    v1::GrainTypeDescription* type = reply->add_grain_types();
    type->set_name(std::string(iface.type_name));
    type->set_reentrant(iface.reentrant);
    const google::protobuf::ServiceDescriptor* service = iface.descriptor();
    for (size_t i = 0; i < iface.method_count; ++i) {
      const MethodInfo& m = iface.methods[i];
      v1::MethodDescription* method = type->add_methods();
      method->set_name(std::string(m.name));
      method->set_one_way(m.one_way);
      method->set_read_only(m.read_only);
      method->set_always_interleave(m.always_interleave);
      method->set_server_streaming(m.server_streaming);
      if (service != nullptr) {
        if (const auto* md = service->FindMethodByName(std::string(m.name))) {
          method->set_input_type(md->input_type()->full_name());
          method->set_output_type(md->output_type()->full_name());
        }
      }
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GatewayService::Impl::Cluster(
    grpc::CallbackServerContext* context, const v1::ClusterRequest*,
    v1::MembershipView* reply) {
  Runtime* const silo = this->silo();
  if (silo == nullptr) return Starting(context);
  if (options_.cluster_view) {
    options_.cluster_view(reply);
  } else {
    v1::Member* me = reply->add_members();
    // A silo outside any cluster: its name is "HOST:PORT@generation".
    const std::string& name = silo->name();
    const size_t at = name.rfind('@');
    me->set_address(name.substr(0, at));
    if (at != std::string::npos) {
      int64_t generation = 0;
      if (absl::SimpleAtoi(name.substr(at + 1), &generation)) {
        me->set_generation(generation);
      }
    }
    me->set_status(silo->internals().stopping() ? v1::MEMBER_SHUTTING_DOWN
                                                : v1::MEMBER_ACTIVE);
    me->set_gateway(address());
    me->set_activations(static_cast<int64_t>(silo->ActivationCount()));
    me->set_start_unix_ms(absl::ToUnixMillis(started_));
  }
  // Activation counts in the table are as of each silo's last heartbeat;
  // this silo's own is current.
  for (v1::Member& m : *reply->mutable_members()) {
    if (m.gateway() == address()) {
      m.set_activations(static_cast<int64_t>(silo->ActivationCount()));
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

GatewayService::GatewayService(Runtime* silo, GatewayServiceOptions options)
    : impl_(std::make_unique<Impl>(silo, std::move(options))) {}

void GatewayService::Attach(Runtime* silo) { impl_->Attach(silo); }

GatewayService::~GatewayService() = default;

grpc::Service* GatewayService::grpc_service() { return impl_.get(); }

void GatewayService::set_address(std::string address) {
  impl_->set_address(std::move(address));
}

void GatewayService::Drain() { impl_->Drain(); }

void GatewayService::Stop() { impl_->Stop(); }

int GatewayService::open_streams() const { return impl_->open_streams(); }

bool GatewayService::WaitForStreamsClosed(absl::Duration timeout) {
  return impl_->WaitForStreamsClosed(timeout);
}

}  // namespace granary::silo
