#include "directory/directory_client.h"

#include <utility>

#include "core/callback_task.h"
#include "core/grain_id.h"

namespace granary::directory {

Task<DirectoryClient::Reply> DirectoryClient::Register(
    v1::DirectoryEntry entry, std::optional<v1::DirectoryEntry> replace) {
  v1::DirectoryRequest request;
  *request.mutable_entry() = std::move(entry);
  if (replace.has_value()) *request.mutable_replace() = *std::move(replace);
  co_return co_await Send(DirectoryOp::kRegister, std::move(request));
}

Task<DirectoryClient::Reply> DirectoryClient::Move(v1::DirectoryEntry entry,
                                                   v1::DirectoryEntry from,
                                                   bool confirm) {
  v1::DirectoryRequest request;
  *request.mutable_entry() = std::move(entry);
  *request.mutable_replace() = std::move(from);
  request.set_move(true);
  request.set_confirm(confirm);
  co_return co_await Send(DirectoryOp::kRegister, std::move(request));
}

Task<DirectoryClient::Reply> DirectoryClient::Lookup(GrainId id) {
  v1::DirectoryRequest request;
  request.mutable_entry()->set_type(std::string(id.type()));
  request.mutable_entry()->set_key(id.key());
  co_return co_await Send(DirectoryOp::kLookup, std::move(request));
}

Task<DirectoryClient::Reply> DirectoryClient::Unregister(
    v1::DirectoryEntry entry) {
  v1::DirectoryRequest request;
  *request.mutable_entry() = std::move(entry);
  co_return co_await Send(DirectoryOp::kUnregister, std::move(request));
}

Task<DirectoryClient::Reply> DirectoryClient::Send(
    DirectoryOp op, v1::DirectoryRequest request) {
  request.set_view_version(local_->view_version());
  const GrainId id(InternTypeName(request.entry().type()),
                   request.entry().key());
  const std::string owner = local_->OwnerOf(id);
  if (owner.empty()) {
    co_return absl::UnavailableError("no Active silo owns any grain yet");
  }
  if (owner == local_->self_id()) {
    switch (op) {
      case DirectoryOp::kRegister:
        co_return local_->Register(request);
      case DirectoryOp::kLookup:
        co_return local_->Lookup(request);
      case DirectoryOp::kUnregister:
        co_return local_->Unregister(request);
    }
  }
  co_return co_await FromCallback<Reply>([&](std::function<void(Reply)> done) {
    transport_->SendDirectory(owner, op, std::move(request), std::move(done));
  });
}

Task<absl::StatusOr<v1::RebuildReply>> DirectoryClient::Rebuild(
    std::string owner, v1::RebuildRequest request) {
  request.set_view_version(local_->view_version());
  if (owner == local_->self_id()) co_return local_->Rebuild(request);
  co_return co_await FromCallback<absl::StatusOr<v1::RebuildReply>>(
      [&](std::function<void(absl::StatusOr<v1::RebuildReply>)> done) {
        transport_->SendRebuild(owner, std::move(request), std::move(done));
      });
}

}  // namespace granary::directory
