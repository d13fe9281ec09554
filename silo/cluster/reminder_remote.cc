#include "silo/cluster/reminder_remote.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/detach.h"
#include "core/status.h"
#include "grpcpp/grpcpp.h"
#include "rpc/async_unary.h"
#include "rpc/callback_queue.h"
#include "rpc/credentials.h"
#include "rpc/limits.h"
#include "rpc/status.h"
#include "silo/runtime/runtime.h"

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

void ReminderPeerService::SetHostCheck(GrainHostCheck check) {
  check_.Set(std::move(check));
}

Task<absl::Status> ReminderPeerService::MayChange(rpc::PeerAuthority peer,
                                                  GrainId grain) const {
  return check_.Run(std::move(peer), std::move(grain),
                    "the reminder service is not ready yet");
}

Task<absl::StatusOr<absl::Time>> ReminderPeerService::CheckedRegister(
    rpc::PeerAuthority peer, Runtime* silo, GrainId grain, std::string name,
    absl::Duration due, absl::Duration period) {
  Task<absl::Status> may_task = MayChange(std::move(peer), grain);
  absl::Status may = co_await std::move(may_task);
  if (!may.ok()) co_return may;
  co_return co_await silo->internals().reminders().RegisterHere(
      std::move(grain), std::move(name), due, period);
}

Task<absl::StatusOr<bool>> ReminderPeerService::CheckedUnregister(
    rpc::PeerAuthority peer, Runtime* silo, GrainId grain, std::string name) {
  Task<absl::Status> may_task = MayChange(std::move(peer), grain);
  absl::Status may = co_await std::move(may_task);
  if (!may.ok()) co_return may;
  co_return co_await silo->internals().reminders().UnregisterHere(
      std::move(grain), std::move(name));
}

absl::StatusOr<GrainId> ReminderPeerService::ToGrain(const std::string& type,
                                                     const std::string& key,
                                                     Runtime** silo) const {
  *silo = silo_.load(std::memory_order_acquire);
  if (*silo == nullptr) {
    return absl::UnavailableError("the reminder service is not ready yet");
  }
  const InterfaceInfo* iface = (*silo)->FindInterface(type);
  // A type this silo does not know but a live silo hosts (a later
  // release's, during a rolling upgrade): its reminders are scheduled here
  // all the same, and their ticks go to the grain's silo.
  const CallRouter* router = (*silo)->internals().router();
  const absl::string_view name = iface != nullptr ? iface->type_name
                                 : router != nullptr
                                     ? router->HostedTypeName(type)
                                     : absl::string_view();
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reminder request for unknown grain type '", type.substr(0, 256), "'"));
  }
  if (absl::Status valid = ValidateGrainKey(key); !valid.ok()) return valid;
  return GrainId(name, key);
}

grpc::ServerUnaryReactor* ReminderPeerService::Register(
    grpc::CallbackServerContext* context,
    const v1::RegisterReminderRequest* request,
    v1::RegisterReminderReply* reply) {
  Runtime* silo = nullptr;
  absl::StatusOr<GrainId> grain =
      ToGrain(request->type(), request->key(), &silo);
  if (!grain.ok()) return Refuse(context, grain.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Detach(CheckedRegister(rpc::AuthorityOf(*context), silo, *std::move(grain),
                         request->name(), absl::Microseconds(request->due_us()),
                         absl::Microseconds(request->period_us())),
         [reactor, reply](absl::StatusOr<absl::StatusOr<absl::Time>> r) {
           absl::StatusOr<absl::Time> first_tick = Flatten(std::move(r));
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
  Runtime* silo = nullptr;
  absl::StatusOr<GrainId> grain =
      ToGrain(request->type(), request->key(), &silo);
  if (!grain.ok()) return Refuse(context, grain.status());
  if (request->name().empty() ||
      request->name().size() > kMaxReminderNameBytes) {
    return Refuse(context, absl::InvalidArgumentError(
                               absl::StrCat("a reminder name has 1 to ",
                                            kMaxReminderNameBytes, " bytes")));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Detach(CheckedUnregister(rpc::AuthorityOf(*context), silo, *std::move(grain),
                           request->name()),
         [reactor, reply](absl::StatusOr<absl::StatusOr<bool>> r) {
           absl::StatusOr<bool> existed = Flatten(std::move(r));
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
  Runtime* silo = nullptr;
  absl::StatusOr<GrainId> grain =
      ToGrain(request->type(), request->key(), &silo);
  if (!grain.ok()) return Refuse(context, grain.status());
  for (const ReminderTick& t : silo->internals().reminders().ListHere(*grain)) {
    ToTickMessage(t, reply->add_reminders());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

absl::StatusOr<ReminderKeeper*> RangeReminders::To(const GrainId& grain) {
  const std::string owner = owner_(grain);
  if (owner.empty()) {
    return absl::UnavailableError(absl::StrCat("no silo owns the reminders of ",
                                               grain.ToString(), " yet"));
  }
  MutexLock lock(&mu_);
  std::unique_ptr<ReminderKeeper>& peer = peers_[owner];
  if (peer == nullptr) {
    peer =
        std::make_unique<RemoteReminders>(owner, absl::Seconds(10), security_);
  }
  return peer.get();
}

Task<absl::StatusOr<absl::Time>> RangeReminders::Register(
    GrainId grain, std::string name, absl::Duration due,
    absl::Duration period) {
  absl::StatusOr<ReminderKeeper*> to = To(grain);
  if (!to.ok()) co_return to.status();
  co_return co_await (*to)->Register(std::move(grain), std::move(name), due,
                                     period);
}

Task<absl::StatusOr<bool>> RangeReminders::Unregister(GrainId grain,
                                                      std::string name) {
  absl::StatusOr<ReminderKeeper*> to = To(grain);
  if (!to.ok()) co_return to.status();
  co_return co_await (*to)->Unregister(std::move(grain), std::move(name));
}

Task<absl::StatusOr<std::vector<ReminderTick>>> RangeReminders::List(
    GrainId grain) {
  absl::StatusOr<ReminderKeeper*> to = To(grain);
  if (!to.ok()) co_return to.status();
  co_return co_await (*to)->List(std::move(grain));
}

RemoteReminders::RemoteReminders(const std::string& primary,
                                 absl::Duration timeout,
                                 const rpc::ClientSecurity& security)
    : timeout_(timeout) {
  rpc::HoldGrpcCallbackQueue();
  stub_ = v1::Reminders::NewStub(
      rpc::NewChannel(primary, rpc::MakeChannelCredentials(security)));
}

Task<absl::StatusOr<absl::Time>> RemoteReminders::Register(
    GrainId grain, std::string name, absl::Duration due,
    absl::Duration period) {
  v1::RegisterReminderRequest request;
  SetGrain(grain, &request);
  request.set_name(std::move(name));
  request.set_due_us(absl::ToInt64Microseconds(due));
  request.set_period_us(absl::ToInt64Microseconds(period));
  absl::StatusOr<v1::RegisterReminderReply> r =
      co_await rpc::AwaitUnary<v1::RegisterReminderRequest,
                               v1::RegisterReminderReply>(
          std::move(request), timeout_, /*wait_for_ready=*/true,
          [this](grpc::ClientContext* c, const v1::RegisterReminderRequest* q,
                 v1::RegisterReminderReply* reply,
                 std::function<void(grpc::Status)> done) {
            stub_->async()->Register(c, q, reply, std::move(done));
          });
  if (!r.ok()) co_return r.status();
  co_return absl::FromUnixMicros(r->first_tick_unix_us());
}

Task<absl::StatusOr<bool>> RemoteReminders::Unregister(GrainId grain,
                                                       std::string name) {
  v1::UnregisterReminderRequest request;
  SetGrain(grain, &request);
  request.set_name(std::move(name));
  absl::StatusOr<v1::UnregisterReminderReply> r =
      co_await rpc::AwaitUnary<v1::UnregisterReminderRequest,
                               v1::UnregisterReminderReply>(
          std::move(request), timeout_, /*wait_for_ready=*/true,
          [this](grpc::ClientContext* c, const v1::UnregisterReminderRequest* q,
                 v1::UnregisterReminderReply* reply,
                 std::function<void(grpc::Status)> done) {
            stub_->async()->Unregister(c, q, reply, std::move(done));
          });
  if (!r.ok()) co_return r.status();
  co_return r->existed();
}

Task<absl::StatusOr<std::vector<ReminderTick>>> RemoteReminders::List(
    GrainId grain) {
  v1::ListRemindersRequest request;
  SetGrain(grain, &request);
  absl::StatusOr<v1::ListRemindersReply> r =
      co_await rpc::AwaitUnary<v1::ListRemindersRequest,
                               v1::ListRemindersReply>(
          std::move(request), timeout_, /*wait_for_ready=*/true,
          [this](grpc::ClientContext* c, const v1::ListRemindersRequest* q,
                 v1::ListRemindersReply* reply,
                 std::function<void(grpc::Status)> done) {
            stub_->async()->List(c, q, reply, std::move(done));
          });
  if (!r.ok()) co_return r.status();
  std::vector<ReminderTick> out;
  out.reserve(r->reminders_size());
  for (const v1::ReminderTickMessage& m : r->reminders()) {
    out.push_back(FromTickMessage(m));
  }
  co_return out;
}

}  // namespace granary::silo
