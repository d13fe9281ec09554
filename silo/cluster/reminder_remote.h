// File: silo/cluster/reminder_remote.h
// -----------------------------------------------------------------------------
// Reminders in a dev cluster (DESIGN.md, Storage): the primary keeps the
// reminder table and schedules every reminder; it serves its grains'
// Register, Unregister and List to the other silos (granary.v1.Reminders on
// its silo endpoint), and each of them hands its grains' requests to it
// through RemoteReminders. Ticks go from the primary to wherever the grain
// lives (silo/runtime/reminder_service.h), so no reminder stops when a silo
// other than the primary dies.
//
//   ReminderPeerService service;                 // on the primary
//   builder.RegisterService(&service);
//   ...; service.Attach(&silo);                  // once its types are added
//   RemoteReminders keeper("10.0.0.1:11111");    // on the others
//   silo.internals().reminders().SetKeeper(&keeper);         // before
//   silo.Start()
//
// ReminderPeerService starts the silo's ReminderService task for each
// request and finishes the reactor when it does.
//
// Threading: thread-safe. RemoteReminders' tasks resume their awaiter on
// gRPC's threads.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/grain_id.h"
#include "core/sync.h"
#include "granary/v1/reminders.grpc.pb.h"
#include "rpc/credentials.h"
#include "rpc/security.h"
#include "silo/cluster/routing/grain_host_check.h"
#include "silo/runtime/reminder_service.h"

namespace granary::silo {

class Runtime;

class ReminderPeerService final : public v1::Reminders::CallbackService {
 public:
  ReminderPeerService() = default;
  // The silo whose reminder service answers; until then every request is
  // answered UNAVAILABLE. Grain types are those the silo hosts.
  void Attach(Runtime* silo) { silo_.store(silo, std::memory_order_release); }
  // Registrations and removals from a peer with an identity (mutual TLS)
  // pass `check` first (silo/cluster/routing/grain_host_check.h); until it is
  // set they are answered UNAVAILABLE.
  void SetHostCheck(GrainHostCheck check);

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterReminderRequest* request,
                                     v1::RegisterReminderReply* reply) override;
  grpc::ServerUnaryReactor* Unregister(
      grpc::CallbackServerContext* context,
      const v1::UnregisterReminderRequest* request,
      v1::UnregisterReminderReply* reply) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const v1::ListRemindersRequest* request,
                                 v1::ListRemindersReply* reply) override;

 private:
  // The silo, and the grain a request names: UNAVAILABLE before Attach,
  // INVALID_ARGUMENT for an unknown type or a bad key.
  absl::StatusOr<GrainId> ToGrain(const std::string& type,
                                  const std::string& key, Runtime** silo) const;
  // OK when `peer` may change `grain`'s reminders (see SetHostCheck).
  Task<absl::Status> MayChange(rpc::PeerAuthority peer, GrainId grain) const;
  Task<absl::StatusOr<absl::Time>> CheckedRegister(rpc::PeerAuthority peer,
                                                   Runtime* silo, GrainId grain,
                                                   std::string name,
                                                   absl::Duration due,
                                                   absl::Duration period);
  Task<absl::StatusOr<bool>> CheckedUnregister(rpc::PeerAuthority peer,
                                               Runtime* silo, GrainId grain,
                                               std::string name);

  std::atomic<Runtime*> silo_{nullptr};
  GrainHostCheckSlot check_;
};

// A production cluster's keeper (--cluster=postgres): each request goes to
// the silo that owns the grain's range, `owner(grain)` (its silo endpoint,
// HOST:PORT; empty when no silo is Active), which runs it on its own
// schedule. One RemoteReminders per owner, kept while the process runs
// (a cluster has few silos).
class RangeReminders final : public ReminderKeeper {
 public:
  // `security`: what this silo presents to the owners and trusts in them.
  explicit RangeReminders(std::function<std::string(const GrainId&)> owner,
                          rpc::ClientSecurity security = {})
      : owner_(std::move(owner)), security_(std::move(security)) {}
  Task<absl::StatusOr<absl::Time>> Register(GrainId grain, std::string name,
                                            absl::Duration due,
                                            absl::Duration period) override;
  Task<absl::StatusOr<bool>> Unregister(GrainId grain,
                                        std::string name) override;
  Task<absl::StatusOr<std::vector<ReminderTick>>> List(GrainId grain) override;

 private:
  // The owner's keeper, or UNAVAILABLE when the range has none yet.
  absl::StatusOr<ReminderKeeper*> To(const GrainId& grain);

  const std::function<std::string(const GrainId&)> owner_;
  const rpc::ClientSecurity security_;
  Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<ReminderKeeper>> peers_
      ABSL_GUARDED_BY(mu_);
};

class RemoteReminders final : public ReminderKeeper {
 public:
  // `primary`: the primary silo's endpoint, HOST:PORT.
  // `security`: what this silo presents to the primary and trusts in it.
  explicit RemoteReminders(const std::string& primary,
                           absl::Duration timeout = absl::Seconds(10),
                           const rpc::ClientSecurity& security = {});
  // Each task resumes its awaiter on the gRPC thread that completes the
  // call.
  Task<absl::StatusOr<absl::Time>> Register(GrainId grain, std::string name,
                                            absl::Duration due,
                                            absl::Duration period) override;
  Task<absl::StatusOr<bool>> Unregister(GrainId grain,
                                        std::string name) override;
  Task<absl::StatusOr<std::vector<ReminderTick>>> List(GrainId grain) override;

 private:
  const absl::Duration timeout_;
  std::unique_ptr<v1::Reminders::Stub> stub_;
};

}  // namespace granary::silo
