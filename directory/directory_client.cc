#include "directory/directory_client.h"

#include <utility>

#include "core/grain_id.h"

namespace granary::directory {

void DirectoryClient::Register(const v1::DirectoryEntry& entry, Done done,
                                const v1::DirectoryEntry* replace) {
  v1::DirectoryRequest request;
  *request.mutable_entry() = entry;
  if (replace != nullptr) *request.mutable_replace() = *replace;
  Send(DirectoryOp::kRegister, std::move(request), std::move(done));
}

void DirectoryClient::Lookup(const GrainId& id, Done done) {
  v1::DirectoryRequest request;
  request.mutable_entry()->set_type(std::string(id.type()));
  request.mutable_entry()->set_key(id.key());
  Send(DirectoryOp::kLookup, std::move(request), std::move(done));
}

void DirectoryClient::Unregister(const v1::DirectoryEntry& entry, Done done) {
  v1::DirectoryRequest request;
  *request.mutable_entry() = entry;
  Send(DirectoryOp::kUnregister, std::move(request), std::move(done));
}

void DirectoryClient::Send(DirectoryOp op, v1::DirectoryRequest request,
                           Done done) {
  request.set_view_version(local_->view_version());
  const GrainId id(InternTypeName(request.entry().type()),
                   request.entry().key());
  const std::string owner = local_->OwnerOf(id);
  if (owner.empty()) {
    done(absl::UnavailableError("no Active silo owns any grain yet"));
    return;
  }
  if (owner != local_->self_id()) {
    transport_->SendDirectory(owner, op, std::move(request), std::move(done));
    return;
  }
  switch (op) {
    case DirectoryOp::kRegister:
      done(local_->Register(request));
      return;
    case DirectoryOp::kLookup:
      done(local_->Lookup(request));
      return;
    case DirectoryOp::kUnregister:
      done(local_->Unregister(request));
      return;
  }
}

void DirectoryClient::Rebuild(const std::string& owner,
                              v1::RebuildRequest request, RebuildDone done) {
  request.set_view_version(local_->view_version());
  if (owner == local_->self_id()) {
    done(local_->Rebuild(request));
    return;
  }
  transport_->SendRebuild(owner, std::move(request), std::move(done));
}

}  // namespace granary::directory
