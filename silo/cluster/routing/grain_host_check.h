// File: silo/cluster/routing/grain_host_check.h
// -----------------------------------------------------------------------------
// Least authority between silos for grain state and reminders: a peer on the
// silo port may write the state (a dev cluster's primary keeps it) or the
// reminders (the primary, or the silo owning the grain's range) of a grain
// only while the grain's directory entry names that peer, that is, while
// the grain is active there. Reads are not checked.
//
//   cluster->SetGrainHostCheck(check);          // SiloHost, once it runs
//   absl::Status may = co_await check(rpc::AuthorityOf(*context), grain);
//   // PERMISSION_DENIED: the grain is active elsewhere, or nowhere
//
// A peer without an identity (a plaintext silo port: PeerAuthority::any) is
// not checked, there being nothing to hold it to. The grains of stateless
// worker types, which are never in the directory, may have reminders
// written by any silo.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "core/grain_id.h"
#include "core/sync.h"
#include "core/task.h"
#include "rpc/credentials.h"

namespace granary::directory {
class DirectoryClient;
}  // namespace granary::directory

namespace granary::silo {

class Runtime;

// OK when `peer` hosts `grain` now; PERMISSION_DENIED when it does not;
// the directory's error (UNAVAILABLE while the ring settles) otherwise.
using GrainHostCheck =
    std::function<Task<absl::Status>(rpc::PeerAuthority peer, GrainId grain)>;

// A service's check, set once the silo runs (thread-safe). Run: OK for a
// peer without an identity; UNAVAILABLE `not_ready` while no check is set;
// else the check's answer.
class GrainHostCheckSlot {
 public:
  void Set(GrainHostCheck check);
  Task<absl::Status> Run(rpc::PeerAuthority peer, GrainId grain,
                         std::string not_ready) const;

 private:
  mutable Mutex mu_;
  GrainHostCheck check_ ABSL_GUARDED_BY(mu_);
};

// The check of a silo (`silo`, whose directory client is `directory`): the
// grain's entry, from the directory's owner of it, must name `peer`.
Task<absl::Status> CheckGrainHost(directory::DirectoryClient* directory,
                                  Runtime* silo, rpc::PeerAuthority peer,
                                  GrainId grain);

}  // namespace granary::silo
