#include "silo/cluster/reminder_remote.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/callback_queue.h"
#include "grpcpp/grpcpp.h"
#include "rpc/async_unary.h"
#include "rpc/status.h"
#include "silo/runtime/silo.h"

namespace granary::silo {
namespace {

template <typename Message>
void SetGrain(const GrainId& grain, Message* m) {
  m->set_type(std::string(grain.type()));
  m->set_key(grain.key());
}

grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* context,
                                 const absl::Status& why) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(rpc::ToGrpc(why));
  return reactor;
}

}  // namespace

absl::StatusOr<GrainId> ReminderPeerService::ToGrain(const std::string& type,
                                                     const std::string& key,
                                                     Silo** silo) const {
  *silo = silo_.load(std::memory_order_acquire);
  if (*silo == nullptr) {
    return absl::UnavailableError("the reminder service is not ready yet");
  }
  const InterfaceInfo* iface = (*silo)->FindInterface(type);
  if (iface == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reminder request for unknown grain type '", type.substr(0, 256),
        "'"));
  }
  if (absl::Status valid = ValidateGrainKey(key); !valid.ok()) return valid;
  return GrainId(iface->type_name, key);
}

grpc::ServerUnaryReactor* ReminderPeerService::Register(
    grpc::CallbackServerContext* context,
    const v1::RegisterReminderRequest* request,
    v1::RegisterReminderReply* reply) {
  Silo* silo = nullptr;
  absl::StatusOr<GrainId> grain =
      ToGrain(request->type(), request->key(), &silo);
  if (!grain.ok()) return Refuse(context, grain.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  silo->reminders().Register(
      *grain, request->name(), absl::Microseconds(request->due_us()),
      absl::Microseconds(request->period_us()),
      [reactor, reply](absl::StatusOr<absl::Time> first_tick) {
        if (!first_tick.ok()) {
          reactor->Finish(rpc::ToGrpc(first_tick.status()));
          return;
        }
        reply->set_first_tick_unix_us(absl::ToUnixMicros(*first_tick));
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* ReminderPeerService::Unregister(
    grpc::CallbackServerContext* context,
    const v1::UnregisterReminderRequest* request,
    v1::UnregisterReminderReply* reply) {
  Silo* silo = nullptr;
  absl::StatusOr<GrainId> grain =
      ToGrain(request->type(), request->key(), &silo);
  if (!grain.ok()) return Refuse(context, grain.status());
  if (request->name().empty() ||
      request->name().size() > kMaxReminderNameBytes) {
    return Refuse(context, absl::InvalidArgumentError(absl::StrCat(
                               "a reminder name has 1 to ",
                               kMaxReminderNameBytes, " bytes")));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  silo->reminders().Unregister(
      *grain, request->name(), [reactor, reply](absl::StatusOr<bool> existed) {
        if (!existed.ok()) {
          reactor->Finish(rpc::ToGrpc(existed.status()));
          return;
        }
        reply->set_existed(*existed);
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* ReminderPeerService::List(
    grpc::CallbackServerContext* context,
    const v1::ListRemindersRequest* request, v1::ListRemindersReply* reply) {
  Silo* silo = nullptr;
  absl::StatusOr<GrainId> grain =
      ToGrain(request->type(), request->key(), &silo);
  if (!grain.ok()) return Refuse(context, grain.status());
  for (const ReminderTick& t : silo->reminders().ListHere(*grain)) {
    ToTickMessage(t, reply->add_reminders());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

RemoteReminders::RemoteReminders(const std::string& primary,
                                 absl::Duration timeout)
    : timeout_(timeout) {
  rpc::HoldGrpcCallbackQueue();
  stub_ = v1::Reminders::NewStub(
      grpc::CreateChannel(primary, grpc::InsecureChannelCredentials()));
}

void RemoteReminders::Register(
    const GrainId& grain, const std::string& name, absl::Duration due,
    absl::Duration period,
    std::function<void(absl::StatusOr<absl::Time>)> done) {
  v1::RegisterReminderRequest request;
  SetGrain(grain, &request);
  request.set_name(name);
  request.set_due_us(absl::ToInt64Microseconds(due));
  request.set_period_us(absl::ToInt64Microseconds(period));
  rpc::StartUnary<v1::RegisterReminderRequest, v1::RegisterReminderReply>(
      std::move(request), timeout_, /*wait_for_ready=*/true, nullptr,
      [this](grpc::ClientContext* c, const v1::RegisterReminderRequest* q,
             v1::RegisterReminderReply* r,
             std::function<void(grpc::Status)> on_done) {
        stub_->async()->Register(c, q, r, std::move(on_done));
      },
      [done = std::move(done)](absl::StatusOr<v1::RegisterReminderReply> r) {
        if (!r.ok()) {
          done(r.status());
          return;
        }
        done(absl::FromUnixMicros(r->first_tick_unix_us()));
      });
}

void RemoteReminders::Unregister(
    const GrainId& grain, const std::string& name,
    std::function<void(absl::StatusOr<bool>)> done) {
  v1::UnregisterReminderRequest request;
  SetGrain(grain, &request);
  request.set_name(name);
  rpc::StartUnary<v1::UnregisterReminderRequest, v1::UnregisterReminderReply>(
      std::move(request), timeout_, /*wait_for_ready=*/true, nullptr,
      [this](grpc::ClientContext* c, const v1::UnregisterReminderRequest* q,
             v1::UnregisterReminderReply* r,
             std::function<void(grpc::Status)> on_done) {
        stub_->async()->Unregister(c, q, r, std::move(on_done));
      },
      [done = std::move(done)](absl::StatusOr<v1::UnregisterReminderReply> r) {
        if (!r.ok()) {
          done(r.status());
          return;
        }
        done(r->existed());
      });
}

void RemoteReminders::List(
    const GrainId& grain,
    std::function<void(absl::StatusOr<std::vector<ReminderTick>>)> done) {
  v1::ListRemindersRequest request;
  SetGrain(grain, &request);
  rpc::StartUnary<v1::ListRemindersRequest, v1::ListRemindersReply>(
      std::move(request), timeout_, /*wait_for_ready=*/true, nullptr,
      [this](grpc::ClientContext* c, const v1::ListRemindersRequest* q,
             v1::ListRemindersReply* r,
             std::function<void(grpc::Status)> on_done) {
        stub_->async()->List(c, q, r, std::move(on_done));
      },
      [done = std::move(done)](absl::StatusOr<v1::ListRemindersReply> r) {
        if (!r.ok()) {
          done(r.status());
          return;
        }
        std::vector<ReminderTick> out;
        out.reserve(r->reminders_size());
        for (const v1::ReminderTickMessage& m : r->reminders()) {
          out.push_back(FromTickMessage(m));
        }
        done(std::move(out));
      });
}

}  // namespace granary::silo
