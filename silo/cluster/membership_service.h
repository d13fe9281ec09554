// File: silo/cluster/membership_service.h
// -----------------------------------------------------------------------------
// The gRPC services of the silo endpoint for the cluster:
//   granary.v1.Membership  - the table, served by a `dev` cluster's primary
//                            from its InMemoryMembershipTable
//   granary.v1.SiloControl - liveness probes, answered by every silo
// and the client side of Membership for the other silos.
//
//   MembershipService table_service(&table);          // primary only
//   SiloControlService control(my_id);
//   builder.RegisterService(&table_service); builder.RegisterService(&control);
//
//   RemoteMembershipTable remote(channel_to_primary);  // everyone else
//   remote.Watch([&](const v1::MembershipView& v) { agent.OnView(v); });
//
// Threading: thread-safe. RemoteMembershipTable's Read and Write block the
// calling thread for up to their timeout (the membership agent calls them
// from its own thread); Watch runs a thread of its own.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "core/sync.h"
#include "granary/v1/cluster.grpc.pb.h"
#include "storage/membership_table.h"

namespace granary::silo {

class MembershipService final : public v1::Membership::CallbackService {
 public:
  explicit MembershipService(storage::InMemoryMembershipTable* table)
      : table_(table) {}

  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* context,
                                 const v1::ReadMembershipRequest* request,
                                 v1::MembershipView* reply) override;
  grpc::ServerUnaryReactor* Write(grpc::CallbackServerContext* context,
                                  const v1::WriteMemberRequest* request,
                                  v1::WriteMemberReply* reply) override;
  grpc::ServerWriteReactor<v1::MembershipView>* Watch(
      grpc::CallbackServerContext* context,
      const v1::WatchMembershipRequest* request) override;

 private:
  storage::InMemoryMembershipTable* const table_;
};

class SiloControlService final : public v1::SiloControl::CallbackService {
 public:
  // Probes are answered UNAVAILABLE until the silo's id is set (it carries
  // the port, known only once the endpoint is bound).
  void set_id(std::string id) {
    MutexLock lock(&mu_);
    id_ = std::move(id);
  }
  grpc::ServerUnaryReactor* Probe(grpc::CallbackServerContext* context,
                                  const v1::ProbeRequest* request,
                                  v1::ProbeReply* reply) override;

 private:
  Mutex mu_;
  std::string id_ ABSL_GUARDED_BY(mu_);
};

class RemoteMembershipTable final : public storage::MembershipTable {
 public:
  // `primary` is the primary silo's endpoint, HOST:PORT.
  explicit RemoteMembershipTable(const std::string& primary,
                                 absl::Duration timeout = absl::Seconds(2));
  ~RemoteMembershipTable() override;

  Task<absl::StatusOr<v1::MembershipView>> Read() override;
  Task<absl::StatusOr<int64_t>> Write(v1::Member member,
                                      int64_t expected_version) override;

  // Streams every view to `fn` (on the watch thread), reconnecting after a
  // failure. One watch per table; StopWatch (or the destructor) ends it.
  void Watch(std::function<void(const v1::MembershipView&)> fn);
  void StopWatch();

 private:
  void WatchLoop(std::function<void(const v1::MembershipView&)> fn);

  const absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Membership::Stub> stub_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread watcher_;
};

}  // namespace granary::silo
