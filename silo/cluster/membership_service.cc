#include "silo/cluster/membership_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "rpc/async_unary.h"
#include "rpc/callback_queue.h"
#include "rpc/credentials.h"
#include "rpc/limits.h"
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

namespace {

bool SameVotes(const v1::Member& a, const v1::Member& b) {
  return std::equal(
      a.suspicions().begin(), a.suspicions().end(), b.suspicions().begin(),
      b.suspicions().end(), [](const v1::Suspicion& x, const v1::Suspicion& y) {
        return x.by() == y.by() && x.at_unix_ms() == y.at_unix_ms();
      });
}

bool HasVote(const v1::Member& m, const v1::Suspicion& vote) {
  for (const v1::Suspicion& v : m.suspicions()) {
    if (v.by() == vote.by() && v.at_unix_ms() == vote.at_unix_ms()) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::Status AuthorizeMemberWrite(const rpc::PeerAuthority& peer,
                                  const v1::MembershipView& view,
                                  const v1::Member& next) {
  const v1::Member* current = nullptr;
  for (const v1::Member& m : view.members()) {
    if (m.address() == next.address() && m.generation() == next.generation()) {
      current = &m;
    }
  }
  if (current == nullptr) {
    if (!peer.Covers(next.address())) {
      return absl::PermissionDeniedError(
          "a silo adds only its own membership row (its certificate does not "
          "name the row's host)");
    }
    if (next.status() != v1::MEMBER_JOINING) {
      return absl::PermissionDeniedError(
          "a silo's new membership row starts as Joining");
    }
    return absl::OkStatus();
  }
  // A vote: the row as it was but for votes, and perhaps Dead, with at
  // least one new vote, each in the writer's name. (The table checks that
  // votes count, and how many declare a silo dead: storage::CheckVotes.)
  v1::Member same = next;
  same.clear_suspicions();
  same.set_status(current->status());
  v1::Member was = *current;
  was.clear_suspicions();
  const bool only_votes =
      google::protobuf::util::MessageDifferencer::Equals(same, was) &&
      (next.status() == current->status() || next.status() == v1::MEMBER_DEAD);
  int added = 0;
  for (const v1::Suspicion& v : next.suspicions()) {
    if (HasVote(*current, v)) continue;
    if (!peer.Covers(v.by())) {
      return absl::PermissionDeniedError("a silo votes only in its own name");
    }
    ++added;
  }
  if (only_votes && added > 0) return absl::OkStatus();
  if (!peer.Covers(next.address())) {
    if (only_votes && next.status() != current->status()) {
      return absl::PermissionDeniedError(
          "a silo declares another dead only with its own vote");
    }
    if (only_votes) return absl::OkStatus();  // expired votes dropped
    return absl::PermissionDeniedError(
        "a silo changes nothing of another silo's membership row but its own "
        "suspicion vote");
  }
  // Its own row: anything but the votes on it, which are the others' to
  // cast and to let expire. (A plaintext peer speaks for every row, so
  // nothing tells its own row from another's.)
  if (!peer.any && !SameVotes(next, *current)) {
    return absl::PermissionDeniedError(
        "a silo does not change the suspicion votes on its own row");
  }
  return absl::OkStatus();
}

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
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Checked against the table at the version the write expects; a write
  // that expects another version would fail its compare-and-swap anyway
  // (and must not slip past the check if the table reached that version
  // meanwhile), and one that lands between this snapshot and WriteNow
  // makes WriteNow fail it.
  const v1::MembershipView view = table_->Snapshot();
  if (view.version() != request->expected_version()) {
    reactor->Finish(rpc::ToGrpc(absl::AbortedError(absl::StrCat(
        "the membership table is at version ", view.version(), ", not ",
        request->expected_version(), "; read it again"))));
    return reactor;
  }
  if (absl::Status allowed = AuthorizeMemberWrite(rpc::AuthorityOf(*context),
                                                  view, request->member());
      !allowed.ok()) {
    GRANARY_LOG_EVERY(kWarning, absl::Seconds(1))
        << "peer=" << LogQuote(context->peer())
        << " membership write refused: " << allowed.message();
    reactor->Finish(rpc::ToGrpc(allowed));
    return reactor;
  }
  absl::StatusOr<int64_t> version =
      table_->WriteNow(request->member(), request->expected_version());
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

grpc::ServerUnaryReactor* SiloControlService::AcceptMigration(
    grpc::CallbackServerContext* context, const v1::MigrationRequest* request,
    v1::MigrationReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Migrations migrations;
  {
    MutexLock lock(&mu_);
    migrations = migrations_;
  }
  if (!migrations) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 "this silo takes no migrations now"));
    return reactor;
  }
  // The request and reply live until Finish.
  migrations(*request, [reactor, reply](absl::StatusOr<v1::MigrationReply> r) {
    if (r.ok()) *reply = *std::move(r);
    reactor->Finish(r.ok() ? grpc::Status::OK : rpc::ToGrpc(r.status()));
  });
  return reactor;
}

RemoteMembershipTable::RemoteMembershipTable(
    const std::string& primary, absl::Duration timeout,
    const rpc::ClientSecurity& security)
    : timeout_((rpc::HoldGrpcCallbackQueue(), timeout)),
      channel_(rpc::NewChannel(primary, rpc::MakeChannelCredentials(security))),
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
