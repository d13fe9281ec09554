#include "silo/cluster/membership_service.h"

#include <atomic>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "grpcpp/grpcpp.h"
#include "rpc/async_unary.h"
#include "rpc/callback_queue.h"
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
  reactor->Finish(version.ok() ? grpc::Status::OK
                               : rpc::ToGrpc(version.status()));
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
  if (health_) {
    if (absl::Status healthy = health_(); !healthy.ok()) {
      reactor->Finish(rpc::ToGrpc(healthy));
      return reactor;
    }
  }
  reply->set_id(id_);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

RemoteMembershipTable::RemoteMembershipTable(const std::string& primary,
                                             absl::Duration timeout)
    : timeout_((rpc::HoldGrpcCallbackQueue(), timeout)),
      channel_(
          grpc::CreateChannel(primary, grpc::InsecureChannelCredentials())),
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

// One Watch call to the primary. It reads views until the stream ends,
// then hands itself back to the table (OnDone), which may open the next.
class RemoteMembershipTable::WatchStream final
    : public grpc::ClientReadReactor<v1::MembershipView> {
 public:
  WatchStream(RemoteMembershipTable* table, int64_t after) : table_(table) {
    request_.set_after_version(after);
    // Waits for the primary to be reachable (gRPC's connection backoff)
    // instead of failing at once while it is down.
    context_.set_wait_for_ready(true);
  }
  void Begin() {
    table_->stub_->async()->Watch(&context_, &request_, this);
    StartRead(&view_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    delivered_.store(true, std::memory_order_relaxed);
    table_->Deliver(view_);
    StartRead(&view_);
  }
  void OnDone(const grpc::Status& status) override {
    table_->StreamEnded(this, status,
                        delivered_.load(std::memory_order_relaxed));
    delete this;
  }

 private:
  RemoteMembershipTable* const table_;
  grpc::ClientContext context_;
  v1::WatchMembershipRequest request_;
  v1::MembershipView view_;
  // Atomic: successive reads complete on different gRPC threads, ordered
  // by gRPC in a way ThreadSanitizer does not see.
  std::atomic<bool> delivered_{false};
};

void RemoteMembershipTable::ReconnectTimer::OnTimer() {
  MutexLock lock(&table->mu_);
  table->reconnect_pending_ = false;
  if (!table->stopping_) table->OpenLocked();
  table->cv_.SignalAll();
}

void RemoteMembershipTable::Watch(
    TimerQueue* timers, std::function<void(const v1::MembershipView&)> fn) {
  MutexLock lock(&mu_);
  timers_ = timers;
  {
    MutexLock deliver_lock(&deliver_mu_);
    fn_ = std::move(fn);
  }
  stopping_ = false;
  OpenLocked();
}

void RemoteMembershipTable::OpenLocked() {
  int64_t after;
  {
    MutexLock deliver_lock(&deliver_mu_);
    after = seen_;
  }
  stream_ = new WatchStream(this, after);
  stream_->Begin();
}

void RemoteMembershipTable::Deliver(const v1::MembershipView& view) {
  MutexLock lock(&deliver_mu_);
  if (view.version() <= seen_) return;
  seen_ = view.version();
  fn_(view);
}

void RemoteMembershipTable::StreamEnded(WatchStream* stream,
                                        const grpc::Status& status,
                                        bool delivered) {
  MutexLock lock(&mu_);
  if (stream_ == stream) stream_ = nullptr;
  if (!stopping_) {
    GRANARY_LOG(kDebug) << "membership watch ended (" << status.error_message()
                        << "); reconnecting";
    if (delivered) {
      OpenLocked();  // at once: wait_for_ready waits for the primary
    } else {
      // A stream that ended before its first view (the primary refused or
      // is stopping): pause so this is not a busy loop. The agent's
      // periodic re-read covers the gap.
      reconnect_pending_ = true;
      timers_->Schedule(&reconnect_,
                        timers_->clock()->Now() + kWatchRetryPause);
    }
  }
  cv_.SignalAll();
}

void RemoteMembershipTable::StopWatch() {
  MutexLock lock(&mu_);
  stopping_ = true;
  if (stream_ != nullptr) stream_->Cancel();
  if (reconnect_pending_ && timers_->Cancel(&reconnect_)) {
    reconnect_pending_ = false;
  }
  // A timer that is firing right now clears reconnect_pending_ itself.
  while (stream_ != nullptr || reconnect_pending_) cv_.Wait(&mu_);
}

}  // namespace granary::silo
