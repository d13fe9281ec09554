#include "directory/directory_transport.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/member.h"
#include "grpcpp/grpcpp.h"
#include "rpc/async_unary.h"
#include "rpc/callback_queue.h"
#include "rpc/credentials.h"
#include "rpc/limits.h"

namespace granary::directory {

GrpcDirectoryTransport::GrpcDirectoryTransport(absl::Duration timeout,
                                               rpc::ClientSecurity security)
    : timeout_(timeout), security_(std::move(security)) {
  rpc::HoldGrpcCallbackQueue();
}

void GrpcDirectoryTransport::OnView(const v1::MembershipView& view) {
  MutexLock lock(&mu_);
  addresses_.clear();
  for (const v1::Member& m : view.members()) {
    if (m.status() != v1::MEMBER_DEAD) addresses_[MemberId(m)] = m.address();
  }
  for (auto it = stubs_.begin(); it != stubs_.end();) {
    if (!addresses_.contains(it->first)) {
      stubs_.erase(it++);  // requests in flight keep their own reference
    } else {
      ++it;
    }
  }
}

std::shared_ptr<v1::Directory::Stub> GrpcDirectoryTransport::StubFor(
    const std::string& silo_id) {
  MutexLock lock(&mu_);
  auto address = addresses_.find(silo_id);
  if (address == addresses_.end()) return nullptr;
  std::shared_ptr<v1::Directory::Stub>& stub = stubs_[silo_id];
  if (stub == nullptr) {
    stub = v1::Directory::NewStub(rpc::NewChannel(
        address->second, rpc::MakeChannelCredentials(security_)));
  }
  return stub;
}

void GrpcDirectoryTransport::SendDirectory(const std::string& silo_id,
                                           DirectoryOp op,
                                           v1::DirectoryRequest request,
                                           Done done) {
  std::shared_ptr<v1::Directory::Stub> stub = StubFor(silo_id);
  if (stub == nullptr) {
    done(absl::UnavailableError(absl::StrCat("no address for silo ", silo_id)));
    return;
  }
  rpc::StartUnary<v1::DirectoryRequest, v1::DirectoryReply>(
      std::move(request), timeout_, /*wait_for_ready=*/false, stub,
      [&](grpc::ClientContext* c, const v1::DirectoryRequest* q,
          v1::DirectoryReply* r, std::function<void(grpc::Status)> on_done) {
        switch (op) {
          case DirectoryOp::kRegister:
            stub->async()->Register(c, q, r, std::move(on_done));
            break;
          case DirectoryOp::kLookup:
            stub->async()->Lookup(c, q, r, std::move(on_done));
            break;
          case DirectoryOp::kUnregister:
            stub->async()->Unregister(c, q, r, std::move(on_done));
            break;
        }
      },
      std::move(done));
}

void GrpcDirectoryTransport::SendRebuild(const std::string& silo_id,
                                         v1::RebuildRequest request,
                                         RebuildDone done) {
  std::shared_ptr<v1::Directory::Stub> stub = StubFor(silo_id);
  if (stub == nullptr) {
    done(absl::UnavailableError(absl::StrCat("no address for silo ", silo_id)));
    return;
  }
  rpc::StartUnary<v1::RebuildRequest, v1::RebuildReply>(
      std::move(request), timeout_, /*wait_for_ready=*/false, stub,
      [&](grpc::ClientContext* c, const v1::RebuildRequest* q,
          v1::RebuildReply* r, std::function<void(grpc::Status)> on_done) {
        stub->async()->Rebuild(c, q, r, std::move(on_done));
      },
      std::move(done));
}

}  // namespace granary::directory
