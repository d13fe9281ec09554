#include "silo/cluster/membership_service.h"

#include "rpc/callback_queue.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "rpc/async_unary.h"
#include "grpcpp/grpcpp.h"
#include "rpc/status.h"

namespace granary::silo {
namespace {

// One Watch stream: the current view, then every newer one. At most one
// write is in flight; views that arrive meanwhile collapse into the newest.
class WatchStream final : public grpc::ServerWriteReactor<v1::MembershipView> {
 public:
  WatchStream(storage::InMemoryMembershipTable* table, int64_t after)
      : table_(table), sent_version_(after) {
    subscription_ = table_->Subscribe(
        [this](const v1::MembershipView& view) { Offer(view); });
    Offer(table_->Snapshot());
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {  // the client went away
      if (!finished_) Finish(grpc::Status::OK);
      finished_ = true;
      return;
    }
    MaybeWrite();
  }

  void OnCancel() override {
    MutexLock lock(&mu_);
    if (!finished_) {
      finished_ = true;
      Finish(grpc::Status::CANCELLED);
    }
  }

  void OnDone() override {
    // gRPC orders this after the constructor, but inside its uninstrumented
    // core; taking mu_ (as the constructor's Offer did) shows
    // ThreadSanitizer that order.
    { MutexLock lock(&mu_); }
    table_->Unsubscribe(subscription_);  // waits for an Offer in progress
    delete this;
  }

 private:
  void Offer(const v1::MembershipView& view) {
    MutexLock lock(&mu_);
    if (view.version() <= sent_version_ ||
        (has_next_ && view.version() <= next_.version())) {
      return;
    }
    next_ = view;
    has_next_ = true;
    MaybeWrite();
  }

  void MaybeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_ || !has_next_) return;
    current_ = std::move(next_);
    has_next_ = false;
    sent_version_ = current_.version();
    writing_ = true;
    StartWrite(&current_);
  }

  storage::InMemoryMembershipTable* const table_;
  int subscription_ = 0;
  Mutex mu_;
  int64_t sent_version_ ABSL_GUARDED_BY(mu_);
  v1::MembershipView current_ ABSL_GUARDED_BY(mu_);
  v1::MembershipView next_ ABSL_GUARDED_BY(mu_);
  bool has_next_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::ServerUnaryReactor* MembershipService::Read(
    grpc::CallbackServerContext* context, const v1::ReadMembershipRequest*,
    v1::MembershipView* reply) {
  *reply = table_->Snapshot();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* MembershipService::Write(
    grpc::CallbackServerContext* context, const v1::WriteMemberRequest* request,
    v1::WriteMemberReply* reply) {
  absl::StatusOr<int64_t> version =
      table_->WriteNow(request->member(), request->expected_version());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (version.ok()) reply->set_version(*version);
  reactor->Finish(version.ok() ? grpc::Status::OK : rpc::ToGrpc(version.status()));
  return reactor;
}

grpc::ServerWriteReactor<v1::MembershipView>* MembershipService::Watch(
    grpc::CallbackServerContext*, const v1::WatchMembershipRequest* request) {
  return new WatchStream(table_, request->after_version());
}

grpc::ServerUnaryReactor* SiloControlService::Probe(
    grpc::CallbackServerContext* context, const v1::ProbeRequest*,
    v1::ProbeReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  MutexLock lock(&mu_);
  if (id_.empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "starting"));
    return reactor;
  }
  reply->set_id(id_);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

RemoteMembershipTable::RemoteMembershipTable(const std::string& primary,
                                             absl::Duration timeout)
    : timeout_((rpc::HoldGrpcCallbackQueue(), timeout)),
      channel_(grpc::CreateChannel(primary, grpc::InsecureChannelCredentials())),
      stub_(v1::Membership::NewStub(channel_)) {}

RemoteMembershipTable::~RemoteMembershipTable() { StopWatch(); }

Task<absl::StatusOr<v1::MembershipView>> RemoteMembershipTable::Read() {
  co_return co_await rpc::AwaitUnary<v1::ReadMembershipRequest,
                                     v1::MembershipView>(
      v1::ReadMembershipRequest(), timeout_, /*wait_for_ready=*/false,
      [this](grpc::ClientContext* c, const v1::ReadMembershipRequest* q,
             v1::MembershipView* r, std::function<void(grpc::Status)> done) {
        stub_->async()->Read(c, q, r, std::move(done));
      });
}

Task<absl::StatusOr<int64_t>> RemoteMembershipTable::Write(
    v1::Member member, int64_t expected_version) {
  v1::WriteMemberRequest request;
  *request.mutable_member() = std::move(member);
  request.set_expected_version(expected_version);
  absl::StatusOr<v1::WriteMemberReply> reply =
      co_await rpc::AwaitUnary<v1::WriteMemberRequest, v1::WriteMemberReply>(
          std::move(request), timeout_, /*wait_for_ready=*/false,
          [this](grpc::ClientContext* c, const v1::WriteMemberRequest* q,
                 v1::WriteMemberReply* r,
                 std::function<void(grpc::Status)> done) {
            stub_->async()->Write(c, q, r, std::move(done));
          });
  if (!reply.ok()) co_return reply.status();
  co_return reply->version();
}

void RemoteMembershipTable::Watch(
    std::function<void(const v1::MembershipView&)> fn) {
  watcher_ = std::thread([this, fn = std::move(fn)] { WatchLoop(fn); });
}

void RemoteMembershipTable::StopWatch() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    if (watch_context_ != nullptr) watch_context_->TryCancel();
    cv_.SignalAll();
  }
  if (watcher_.joinable()) watcher_.join();
}

void RemoteMembershipTable::WatchLoop(
    std::function<void(const v1::MembershipView&)> fn) {
  int64_t seen = 0;
  while (true) {
    grpc::ClientContext context;
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      watch_context_ = &context;
    }
    v1::WatchMembershipRequest request;
    request.set_after_version(seen);
    std::unique_ptr<grpc::ClientReader<v1::MembershipView>> reader =
        stub_->Watch(&context, request);
    v1::MembershipView view;
    while (reader->Read(&view)) {
      if (view.version() > seen) {
        seen = view.version();
        fn(view);
      }
    }
    grpc::Status s = reader->Finish();
    MutexLock lock(&mu_);
    watch_context_ = nullptr;
    if (stopping_) return;
    GRANARY_LOG(kDebug) << "membership watch ended (" << s.error_message()
                        << "); reconnecting";
    // Reconnect after a pause; the agent's periodic re-read covers the gap.
    (void)cv_.WaitWithDeadline(&mu_, absl::Now() + absl::Milliseconds(500));
    if (stopping_) return;
  }
}

}  // namespace granary::silo
