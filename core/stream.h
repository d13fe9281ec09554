// File: core/stream.h
// -----------------------------------------------------------------------------
// Server push: grain methods declared `rpc Watch(WatchRequest) returns
// (stream Event)` send a stream of messages to their caller.
//
// A streaming call is an ordinary call (core/call.h) that carries a
// StreamChannel: a bounded, thread-safe queue of items between one producer
// (the grain's StreamWriter, or a transport bringing items from another
// process) and one consumer (a caller's Stream<E>, or a transport carrying
// them on). The call's end is the stream's end: whoever finishes the call
// (the grain, the caller's cancel, a deadline, the activation going away)
// closes the channel with that status, and the consumer reads every item
// queued before it, then the status.
//
// Grain side (silo/runtime/grain.h has the base classes):
//
//   granary::Task<void> Watch(const WatchRequest& r,
//                             granary::StreamWriter<Event> out) override {
//     subscribers_.Add(std::move(out));   // an ObserverSet<Event>
//     co_return;                          // the stream stays open
//   }
//   ... subscribers_.Publish(event);      // from any later turn
//
// Caller side (a silo's or client's reference):
//
//   granary::Stream<Event> events = room.Watch(request);
//   Event e;
//   while (events.Read(&e)) { ... }          // plain thread: blocks
//   while (co_await events.ReadAsync(&e)) {}  // coroutine
//   absl::Status why = events.status();       // how it ended
//
// Backpressure: a channel holds at most `capacity` items. TryWrite refuses
// past it (RESOURCE_EXHAUSTED); `co_await Write` waits for room, so a slow
// consumer slows its producer instead of growing memory. Across the network
// the consumer grants the producer credit as it reads (gateway.proto,
// Request.stream_window and RequestBatch.credits).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/call.h"
#include "core/sync.h"
#include "google/protobuf/message.h"

namespace granary {

// One item of a stream: immutable and shared, so one message published to
// many subscribers is built once.
using StreamItem = std::shared_ptr<const google::protobuf::Message>;

// Items a stream buffers between its producer and consumer by default; also
// the credit a remote consumer grants at first (Request.stream_window).
inline constexpr uint32_t kDefaultStreamWindow = 64;
// The most a remote consumer may ask for.
inline constexpr uint32_t kMaxStreamWindow = 4096;

// Told once that a channel has what it was waited for: an item or the end
// (a reader), or room (a writer, RoomWaiter).
class StreamWaiter {
 public:
  // With the channel's lock held (must not call into the channel): true
  // when ReadyUnlocked must run once the lock is released, on that thread.
  virtual bool ReadyLocked() { return true; }
  virtual void ReadyUnlocked() {}

 protected:
  ~StreamWaiter() = default;
};

// A writer waiting for room, with the item it writes: the channel queues
// the item itself as room appears (so writes keep their order), or sets
// `result` to the end status.
class RoomWaiter : public StreamWaiter {
 public:
  StreamItem item;
  absl::Status result;

 protected:
  ~RoomWaiter() = default;

 private:
  friend class StreamChannel;
  bool linked_ = false;  // guarded by the channel's lock
};

class StreamChannel {
 public:
  // Items are messages of `prototype`'s type.
  StreamChannel(const google::protobuf::Message* prototype, uint32_t capacity)
      : prototype_(prototype), capacity_(capacity == 0 ? 1 : capacity) {}
  StreamChannel(const StreamChannel&) = delete;
  StreamChannel& operator=(const StreamChannel&) = delete;

  void AddRef() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  const google::protobuf::Message& prototype() const { return *prototype_; }
  uint32_t capacity() const { return capacity_; }
  // Items queued and not read.
  size_t size() const;

  // --- producer ------------------------------------------------------------
  // Queues `item`: OK; RESOURCE_EXHAUSTED when `capacity` items wait; once
  // the stream ended, the status it ended with (CANCELLED when the consumer
  // went away) or FAILED_PRECONDITION when it ended OK.
  absl::Status TryPush(StreamItem item);
  // Queues `w->item` once there is room, in the order writers came, then
  // tells `w` (w->result: OK, or the end status when the stream ended
  // first). False (nothing registered) when the item could be decided now:
  // w->result is then TryPush's answer.
  bool PushOrWait(RoomWaiter* w);
  // `w` no longer waits; false when it was told already.
  bool ForgetRoomWaiter(RoomWaiter* w);

  // --- end -----------------------------------------------------------------
  // Ends the stream with `status`; the first end wins. Queued items are
  // still read; nothing is queued from now on.
  void Close(const absl::Status& status);
  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // --- consumer (one) -----------------------------------------------------
  enum class Read { kItem, kEmpty, kEnd };
  // Takes the next item; kEnd once every item is read and the stream ended
  // (`*end` is then its status). A writer waiting for the room this makes
  // is told before it returns, or, with `defer`, added to it: for a
  // consumer holding a lock of its own, which tells them (Tell) once it is
  // released (a writer outside grain code resumes on the telling thread).
  Read TryRead(StreamItem* item, absl::Status* end,
               std::vector<StreamWaiter*>* defer = nullptr);
  static void Tell(const std::vector<StreamWaiter*>& waiters);
  // `w` is told once an item or the end is there; false (nothing
  // registered) when one is already. One consumer waiter at a time.
  bool WaitReadable(StreamWaiter* w);
  // `w` no longer waits; false when it was told already.
  bool ForgetReadWaiter(StreamWaiter* w);
  // Blocks until an item or the end is there (plain threads only), or
  // `timeout` passes (kEmpty).
  Read ReadBlocking(StreamItem* item, absl::Status* end,
                    absl::Duration timeout = absl::InfiniteDuration());
  // Runs after every item the consumer takes, on its thread, with the
  // channel's lock held (so it must not call into the channel): how a
  // transport that brings the items from afar grants credit. Replaces (and
  // destroys) the hook set before; the channel owns it.
  class ReadHook {
   public:
    virtual ~ReadHook() = default;
    virtual void OnRead() = 0;
  };
  void SetReadHook(std::unique_ptr<ReadHook> hook);

  // The writers of the stream (StreamWriter handles): when the last goes,
  // the grain is done with the stream.
  void AddWriter() { writers_.fetch_add(1, std::memory_order_relaxed); }
  // True for the last one.
  bool ReleaseWriter() {
    return writers_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }

 private:
  ~StreamChannel() = default;
  bool ReadableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !items_.empty() || closed_.load(std::memory_order_relaxed);
  }
  // Moves waiting writers' items in while there is room (all of them, with
  // the end status, once closed); adds the waiters to tell unlocked.
  void ServeRoomLocked(std::vector<StreamWaiter*>* unlocked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the reader waiting, if any; adds it to `unlocked` when due.
  void WakeReaderLocked(std::vector<StreamWaiter*>* unlocked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const google::protobuf::Message* const prototype_;
  const uint32_t capacity_;
  std::atomic<int> refs_{1};
  std::atomic<int> writers_{0};
  std::atomic<bool> closed_{false};
  mutable Mutex mu_;
  std::unique_ptr<ReadHook> read_hook_ ABSL_GUARDED_BY(mu_);
  std::deque<StreamItem> items_ ABSL_GUARDED_BY(mu_);
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  StreamWaiter* read_waiter_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::deque<RoomWaiter*> room_waiters_ ABSL_GUARDED_BY(mu_);
};

namespace internal {

// New streaming call of method `method` to `target` whose items are `E`s,
// with a channel of `window` items; holds one reference.
template <typename Req, typename E>
CallBase* NewStreamCall(GrainId target, uint32_t method,
                        uint32_t window = kDefaultStreamWindow) {
  auto* call =
      new Call<Req, google::protobuf::Empty>(std::move(target), method, false);
  call->set_stream(new StreamChannel(&E::default_instance(), window));
  call->set_timeout(absl::InfiniteDuration());
  return call;
}

// Continues a coroutine once a channel is ready: as a turn of its activation
// (a ResumeMessage, posted under the channel's lock, so an awaiter destroyed
// with its frame is never touched after) in grain code, else inline on the
// ready thread once the lock is released.
class StreamResumer {
 public:
  // Prepares to suspend `h` (in the current turn, if any).
  void Prepare(std::coroutine_handle<> h);
  bool ResumeLocked();
  void ResumeUnlocked();
  ~StreamResumer();

 private:
  std::coroutine_handle<> handle_;
  MessageSink* sink_ = nullptr;
  ResumeMessage* message_ = nullptr;
};

// Sends a streaming call the way an awaited call is sent (context, trace,
// cancel scope of the calling turn): core/call.cc.
void StartStreamCall(CallBase* call, CallInvoker* invoker,
                     const CallOptions& options);

// co_await stream.ReadAsync(&e): true with an item, false at the end.
class ReadAwaiter final : public StreamWaiter, StreamResumer {
 public:
  ReadAwaiter(StreamChannel* ch, google::protobuf::Message* out,
              absl::Status* end)
      : ch_(ch), out_(out), end_(end) {}
  ReadAwaiter(ReadAwaiter&&) = delete;
  ~ReadAwaiter();
  bool await_ready() { return Take(); }
  bool await_suspend(std::coroutine_handle<> h);
  // True with an item; false at the end (Take also says "the end was
  // there", which is not an item).
  bool await_resume() {
    if (!got_) Take();
    return got_;
  }
  bool ReadyLocked() override { return ResumeLocked(); }
  void ReadyUnlocked() override { ResumeUnlocked(); }

 private:
  // An item (got_) or the end was there.
  bool Take();
  StreamChannel* ch_;
  google::protobuf::Message* out_;
  absl::Status* end_;
  bool got_ = false;
  bool suspended_ = false;
};

// co_await writer.Write(e): OK once queued, else the stream's end status.
class WriteAwaiter final : public RoomWaiter, StreamResumer {
 public:
  WriteAwaiter(StreamChannel* ch, StreamItem it) : ch_(ch) {
    item = std::move(it);
  }
  WriteAwaiter(WriteAwaiter&&) = delete;
  ~WriteAwaiter();
  bool await_ready() { return false; }
  bool await_suspend(std::coroutine_handle<> h);
  absl::Status await_resume() { return std::move(result); }
  bool ReadyLocked() override { return ResumeLocked(); }
  void ReadyUnlocked() override { ResumeUnlocked(); }

 private:
  StreamChannel* ch_;
  bool suspended_ = false;
};

// The untyped part of StreamWriter<E>.
class StreamWriterBase {
 public:
  StreamWriterBase() = default;
  // Takes a writer's hold on `call`'s stream.
  explicit StreamWriterBase(CallBase* call);
  StreamWriterBase(const StreamWriterBase& o);
  StreamWriterBase(StreamWriterBase&& o) noexcept
      : call_(std::exchange(o.call_, nullptr)) {}
  StreamWriterBase& operator=(StreamWriterBase o) noexcept {
    std::swap(call_, o.call_);
    return *this;
  }
  ~StreamWriterBase();

  // Queues `item` now: OK, RESOURCE_EXHAUSTED when the stream's buffer is
  // full, or the stream's end status once it ended.
  absl::Status TryWrite(StreamItem item) const;
  // Ends the stream with `status` (OK: the caller sees a normal end); a
  // no-op once it ended.
  void Finish(absl::Status status = absl::OkStatus()) const;
  // The stream ended (finished, cancelled by the caller, deactivated...).
  bool done() const;
  // Items waiting to be read by the caller.
  size_t queued() const;
  bool valid() const { return call_ != nullptr; }
  // Whether two handles write the same stream.
  bool same_stream(const StreamWriterBase& o) const { return call_ == o.call_; }

 protected:
  StreamChannel* channel() const;
  CallBase* call_ = nullptr;
};

}  // namespace internal

// A grain's end of a stream: copyable (copies write the same stream). The
// stream ends when Finish is called or the last copy is dropped (OK), or
// earlier when the caller cancels or the activation goes away; writes then
// return the end status.
template <typename E>
class StreamWriter : public internal::StreamWriterBase {
 public:
  StreamWriter() = default;
  explicit StreamWriter(CallBase* call) : StreamWriterBase(call) {}

  using StreamWriterBase::TryWrite;
  absl::Status TryWrite(E item) const {
    return TryWrite(std::make_shared<const E>(std::move(item)));
  }
  // co_await writer.Write(item): waits while the buffer is full; OK once
  // queued, else the stream's end status.
  internal::WriteAwaiter Write(E item) const {
    return internal::WriteAwaiter(channel(),
                                  std::make_shared<const E>(std::move(item)));
  }
  internal::WriteAwaiter Write(StreamItem item) const {
    return internal::WriteAwaiter(channel(), std::move(item));
  }
};

// The caller's end of a stream. Move-only. Dropping it (or Cancel) before
// the end cancels the stream.
template <typename E>
class Stream {
 public:
  Stream() = default;
  // Takes `call`'s reference (a streaming call, already sent).
  explicit Stream(CallBase* call) : call_(call) {}
  Stream(Stream&& o) noexcept
      : call_(std::exchange(o.call_, nullptr)), end_(std::move(o.end_)) {}
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      Reset();
      call_ = std::exchange(o.call_, nullptr);
      end_ = std::move(o.end_);
    }
    return *this;
  }
  ~Stream() { Reset(); }

  // The next item, blocking (never in grain code): false at the end, with
  // status() saying how it ended.
  bool Read(E* out) {
    return Read(out, absl::InfiniteDuration()) == StreamChannel::Read::kItem;
  }
  // As Read, waiting at most `timeout` (kEmpty when it passed).
  StreamChannel::Read Read(E* out, absl::Duration timeout) {
    if (call_ == nullptr) {
      end_ = absl::FailedPreconditionError("empty stream");
      return StreamChannel::Read::kEnd;
    }
    StreamItem item;
    StreamChannel::Read r =
        call_->stream()->ReadBlocking(&item, &end_, timeout);
    if (r == StreamChannel::Read::kItem) {
      *out = static_cast<const E&>(*item);
    }
    return r;
  }
  // co_await stream.ReadAsync(&e): true with an item, false at the end.
  internal::ReadAwaiter ReadAsync(E* out) {
    return internal::ReadAwaiter(call_ != nullptr ? call_->stream() : nullptr,
                                 out, &end_);
  }
  // How the stream ended (after a read returned the end).
  const absl::Status& status() const { return end_; }
  // Ends the stream: the grain's writes fail with CANCELLED; reads return
  // what was queued, then CANCELLED.
  void Cancel() {
    if (call_ != nullptr) call_->Cancel();
  }
  bool valid() const { return call_ != nullptr; }

 private:
  void Reset() {
    if (call_ == nullptr) return;
    if (!call_->stream()->closed()) call_->Cancel();
    call_->Release();
    call_ = nullptr;
  }
  CallBase* call_ = nullptr;
  absl::Status end_;
};

namespace internal {

// Sends a streaming call (generated references).
template <typename Req, typename E>
Stream<E> OpenStream(CallInvoker* invoker, GrainId id, uint32_t method,
                     Req request, const CallOptions& options) {
  CallBase* call = NewStreamCall<Req, E>(std::move(id), method);
  static_cast<Call<Req, google::protobuf::Empty>*>(call)->typed_request() =
      std::move(request);
  if (options.timeout != kDefaultCallTimeout) {
    call->set_timeout(options.timeout);
  }
  Stream<E> stream(call);
  if (invoker == nullptr) {
    call->Fail(NoInvokerError(call->target()));
    return stream;
  }
  StartStreamCall(call, invoker, options);
  return stream;
}

}  // namespace internal

// Many subscribers of one grain: publishing writes to each without waiting;
// subscribers whose stream ended (cancelled, disconnected, deactivated) are
// dropped, and a subscriber that falls a whole buffer behind is ended with
// RESOURCE_EXHAUSTED rather than slowing the rest. With an expiry, a
// subscription older than it is ended OK (the client subscribes again),
// like Orleans' ObserverManager. For grain code (one turn at a time).
template <typename E>
class ObserverSet {
 public:
  explicit ObserverSet(absl::Duration expiry = absl::InfiniteDuration())
      : expiry_(expiry) {}

  void Add(StreamWriter<E> writer, absl::Time now = absl::Now()) {
    if (!writer.valid() || writer.done()) return;
    subscribers_.push_back(Subscriber{std::move(writer), now});
  }
  // Writes `event` to every live subscriber; returns how many took it.
  size_t Publish(E event, absl::Time now = absl::Now()) {
    return PublishItem(std::make_shared<const E>(std::move(event)), now);
  }
  size_t PublishItem(const StreamItem& item, absl::Time now = absl::Now()) {
    size_t delivered = 0;
    size_t kept = 0;
    for (size_t i = 0; i < subscribers_.size(); ++i) {
      Subscriber& s = subscribers_[i];
      if (Expired(s, now)) continue;
      absl::Status st = s.writer.TryWrite(item);
      if (absl::IsResourceExhausted(st)) {
        s.writer.Finish(absl::ResourceExhaustedError(
            "subscriber fell a whole stream buffer behind; subscribe again"));
        continue;
      }
      if (!st.ok()) continue;  // ended
      ++delivered;
      if (kept != i) subscribers_[kept] = std::move(s);
      ++kept;
    }
    subscribers_.resize(kept);
    return delivered;
  }
  // Drops subscribers whose stream ended or expired; returns how many live.
  size_t Prune(absl::Time now = absl::Now()) {
    size_t kept = 0;
    for (size_t i = 0; i < subscribers_.size(); ++i) {
      if (Expired(subscribers_[i], now)) continue;
      if (kept != i) subscribers_[kept] = std::move(subscribers_[i]);
      ++kept;
    }
    subscribers_.resize(kept);
    return kept;
  }
  // Ends every subscription with `status`.
  void FinishAll(absl::Status status = absl::OkStatus()) {
    for (Subscriber& s : subscribers_) s.writer.Finish(status);
    subscribers_.clear();
  }
  // Subscribers held (ended ones are dropped at the next Publish or Prune).
  size_t size() const { return subscribers_.size(); }

 private:
  struct Subscriber {
    StreamWriter<E> writer;
    absl::Time since;
  };
  // Ended, or past the expiry (then finished OK).
  bool Expired(Subscriber& s, absl::Time now) const {
    if (s.writer.done()) return true;
    if (expiry_ != absl::InfiniteDuration() && now - s.since >= expiry_) {
      s.writer.Finish();
      return true;
    }
    return false;
  }
  absl::Duration expiry_;
  std::vector<Subscriber> subscribers_;
};

}  // namespace granary
