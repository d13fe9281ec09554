#include "directory/directory_client.h"

#include <utility>

#include "core/member.h"
#include "grpcpp/grpcpp.h"
#include "rpc/async_unary.h"
#include "rpc/callback_queue.h"

namespace granary::directory {

DirectoryClient::DirectoryClient(DirectoryPartition* local, absl::Duration timeout)
    : local_(local), timeout_(timeout) {
  rpc::HoldGrpcCallbackQueue();
}

void DirectoryClient::OnView(const v1::MembershipView& view) {
  MutexLock lock(&mu_);
  addresses_.clear();
  for (const v1::Member& m : view.members()) {
    if (m.status() != v1::MEMBER_DEAD) {
      addresses_[MemberId(m)] = m.address();
    }
  }
  for (auto it = stubs_.begin(); it != stubs_.end();) {
    if (!addresses_.contains(it->first)) {
      stubs_.erase(it++);  // requests in flight keep their own reference
    } else {
      ++it;
    }
  }
}

std::shared_ptr<v1::Directory::Stub> DirectoryClient::StubFor(
    const std::string& silo_id) {
  MutexLock lock(&mu_);
  auto address = addresses_.find(silo_id);
  if (address == addresses_.end()) return nullptr;
  std::shared_ptr<v1::Directory::Stub>& stub = stubs_[silo_id];
  if (stub == nullptr) {
    stub = v1::Directory::NewStub(grpc::CreateChannel(
        address->second, grpc::InsecureChannelCredentials()));
  }
  return stub;
}

void DirectoryClient::Register(const v1::DirectoryEntry& entry, Done done,
                                const v1::DirectoryEntry* replace) {
  v1::DirectoryRequest request;
  *request.mutable_entry() = entry;
  if (replace != nullptr) *request.mutable_replace() = *replace;
  Send(Op::kRegister, std::move(request), std::move(done));
}

void DirectoryClient::Lookup(const GrainId& id, Done done) {
  v1::DirectoryRequest request;
  request.mutable_entry()->set_type(std::string(id.type()));
  request.mutable_entry()->set_key(id.key());
  Send(Op::kLookup, std::move(request), std::move(done));
}

void DirectoryClient::Unregister(const v1::DirectoryEntry& entry, Done done) {
  v1::DirectoryRequest request;
  *request.mutable_entry() = entry;
  Send(Op::kUnregister, std::move(request), std::move(done));
}

void DirectoryClient::Send(Op op, v1::DirectoryRequest request, Done done) {
  request.set_view_version(local_->view_version());
  const GrainId id(InternTypeName(request.entry().type()),
                   request.entry().key());
  const std::string owner = local_->OwnerOf(id);
  if (owner.empty()) {
    done(absl::UnavailableError("no Active silo owns any grain yet"));
    return;
  }
  if (owner == local_->self_id()) {
    switch (op) {
      case Op::kRegister:
        done(local_->Register(request));
        return;
      case Op::kLookup:
        done(local_->Lookup(request));
        return;
      case Op::kUnregister:
        done(local_->Unregister(request));
        return;
    }
  }
  std::shared_ptr<v1::Directory::Stub> stub = StubFor(owner);
  if (stub == nullptr) {
    done(absl::UnavailableError(absl::StrCat("no address for silo ", owner)));
    return;
  }
  rpc::StartUnary<v1::DirectoryRequest, v1::DirectoryReply>(
      std::move(request), timeout_, /*wait_for_ready=*/false, stub,
      [&](grpc::ClientContext* c, const v1::DirectoryRequest* q,
          v1::DirectoryReply* r, std::function<void(grpc::Status)> on_done) {
        switch (op) {
          case Op::kRegister:
            stub->async()->Register(c, q, r, std::move(on_done));
            break;
          case Op::kLookup:
            stub->async()->Lookup(c, q, r, std::move(on_done));
            break;
          case Op::kUnregister:
            stub->async()->Unregister(c, q, r, std::move(on_done));
            break;
        }
      },
      std::move(done));
}


void DirectoryClient::Rebuild(const std::string& owner,
                               v1::RebuildRequest request, RebuildDone done) {
  request.set_view_version(local_->view_version());
  if (owner == local_->self_id()) {
    done(local_->Rebuild(request));
    return;
  }
  std::shared_ptr<v1::Directory::Stub> stub = StubFor(owner);
  if (stub == nullptr) {
    done(absl::UnavailableError(absl::StrCat("no address for silo ", owner)));
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
