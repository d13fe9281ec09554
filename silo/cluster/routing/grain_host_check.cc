#include "silo/cluster/routing/grain_host_check.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "directory/directory_client.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

namespace {

Task<absl::Status> RunCheck(GrainHostCheck check, rpc::PeerAuthority peer,
                            GrainId grain, std::string not_ready) {
  if (peer.any) co_return absl::OkStatus();
  if (!check) co_return absl::UnavailableError(not_ready);
  Task<absl::Status> checked = check(std::move(peer), std::move(grain));
  co_return co_await std::move(checked);
}

}  // namespace

void GrainHostCheckSlot::Set(GrainHostCheck check) {
  MutexLock lock(&mu_);
  check_ = std::move(check);
}

Task<absl::Status> GrainHostCheckSlot::Run(rpc::PeerAuthority peer,
                                           GrainId grain,
                                           std::string not_ready) const {
  GrainHostCheck check;
  if (!peer.any) {
    MutexLock lock(&mu_);
    check = check_;
  }
  return RunCheck(std::move(check), std::move(peer), std::move(grain),
                  std::move(not_ready));
}

Task<absl::Status> CheckGrainHost(directory::DirectoryClient* directory,
                                  Runtime* silo, rpc::PeerAuthority peer,
                                  GrainId grain) {
  if (peer.any) co_return absl::OkStatus();
  directory::DirectoryClient::Reply reply = co_await directory->Lookup(grain);
  if (!reply.ok()) co_return reply.status();
  if (reply->found() && peer.Covers(reply->entry().silo())) {
    co_return absl::OkStatus();
  }
  if (!reply->found()) {
    const InterfaceInfo* iface = silo->FindInterface(grain.type());
    if (iface != nullptr && iface->stateless_worker) {
      co_return absl::OkStatus();  // never in the directory
    }
  }
  co_return absl::PermissionDeniedError(absl::StrCat(
      "grain ", grain.ToString(),
      reply->found() ? " is active on another silo" : " is active nowhere",
      ": a silo changes the state and reminders of its own grains only"));
}

}  // namespace granary::silo
