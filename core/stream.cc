#include "core/stream.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/turn_resume.h"

namespace granary {
namespace {

// What a write into a stream that ended gets.
absl::Status EndedError(const absl::Status& end) {
  if (!end.ok()) return end;
  return absl::FailedPreconditionError("the stream has ended");
}

}  // namespace

void StreamChannel::Tell(const std::vector<StreamWaiter*>& waiters) {
  for (StreamWaiter* w : waiters) w->ReadyUnlocked();
}

size_t StreamChannel::size() const {
  MutexLock lock(&mu_);
  return items_.size();
}

void StreamChannel::WakeReaderLocked(std::vector<StreamWaiter*>* unlocked) {
  if (StreamWaiter* r = std::exchange(read_waiter_, nullptr)) {
    if (r->ReadyLocked()) unlocked->push_back(r);
  }
}

void StreamChannel::ServeRoomLocked(std::vector<StreamWaiter*>* unlocked) {
  const bool closed = closed_.load(std::memory_order_relaxed);
  while (!room_waiters_.empty() && (closed || items_.size() < capacity_)) {
    RoomWaiter* w = room_waiters_.front();
    room_waiters_.pop_front();
    w->linked_ = false;
    if (closed) {
      w->result = EndedError(end_);
    } else {
      items_.push_back(std::move(w->item));
      w->result = absl::OkStatus();
    }
    if (w->ReadyLocked()) unlocked->push_back(w);
  }
}

absl::Status StreamChannel::TryPush(StreamItem item) {
  std::vector<StreamWaiter*> unlocked;
  {
    MutexLock lock(&mu_);
    if (closed_.load(std::memory_order_relaxed)) return EndedError(end_);
    // Writers already waiting go first: order is kept.
    if (items_.size() >= capacity_ || !room_waiters_.empty()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the stream's buffer of ", capacity_, " items is full"));
    }
    items_.push_back(std::move(item));
    WakeReaderLocked(&unlocked);
  }
  Tell(unlocked);
  return absl::OkStatus();
}

bool StreamChannel::PushOrWait(RoomWaiter* w) {
  std::vector<StreamWaiter*> unlocked;
  {
    MutexLock lock(&mu_);
    if (closed_.load(std::memory_order_relaxed)) {
      w->result = EndedError(end_);
      return false;
    }
    if (items_.size() >= capacity_ || !room_waiters_.empty()) {
      w->linked_ = true;
      room_waiters_.push_back(w);
      return true;
    }
    items_.push_back(std::move(w->item));
    w->result = absl::OkStatus();
    WakeReaderLocked(&unlocked);
  }
  Tell(unlocked);
  return false;
}

bool StreamChannel::ForgetRoomWaiter(RoomWaiter* w) {
  MutexLock lock(&mu_);
  if (!w->linked_) return false;
  w->linked_ = false;
  room_waiters_.erase(std::find(room_waiters_.begin(), room_waiters_.end(), w));
  return true;
}

void StreamChannel::Close(const absl::Status& status) {
  std::vector<StreamWaiter*> unlocked;
  {
    MutexLock lock(&mu_);
    if (closed_.load(std::memory_order_relaxed)) return;
    end_ = status;
    closed_.store(true, std::memory_order_release);
    WakeReaderLocked(&unlocked);
    ServeRoomLocked(&unlocked);
  }
  Tell(unlocked);
}

StreamChannel::Read StreamChannel::TryRead(StreamItem* item, absl::Status* end,
                                           std::vector<StreamWaiter*>* defer) {
  std::vector<StreamWaiter*> own;
  std::vector<StreamWaiter*>& unlocked = defer != nullptr ? *defer : own;
  {
    MutexLock lock(&mu_);
    if (items_.empty()) {
      if (!closed_.load(std::memory_order_relaxed)) return Read::kEmpty;
      *end = end_;
      return Read::kEnd;
    }
    *item = std::move(items_.front());
    items_.pop_front();
    if (read_hook_ != nullptr) read_hook_->OnRead();
    ServeRoomLocked(&unlocked);
  }
  if (defer == nullptr) Tell(own);
  return Read::kItem;
}

void StreamChannel::SetReadHook(std::unique_ptr<ReadHook> hook) {
  std::unique_ptr<ReadHook> old;
  {
    MutexLock lock(&mu_);
    old = std::exchange(read_hook_, std::move(hook));
  }
}

bool StreamChannel::WaitReadable(StreamWaiter* w) {
  MutexLock lock(&mu_);
  if (ReadableLocked()) return false;
  read_waiter_ = w;
  return true;
}

bool StreamChannel::ForgetReadWaiter(StreamWaiter* w) {
  MutexLock lock(&mu_);
  if (read_waiter_ != w) return false;
  read_waiter_ = nullptr;
  return true;
}

StreamChannel::Read StreamChannel::ReadBlocking(StreamItem* item,
                                                absl::Status* end,
                                                absl::Duration timeout) {
  {
    MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(
            [this]()
                ABSL_NO_THREAD_SAFETY_ANALYSIS { return ReadableLocked(); },
            timeout)) {
      return Read::kEmpty;
    }
  }
  return TryRead(item, end);
}

namespace internal {

void StreamResumer::Prepare(std::coroutine_handle<> h) {
  handle_ = h;
  message_ = NewTurnResume(h, &sink_);
}

bool StreamResumer::ResumeLocked() {
  if (sink_ == nullptr) return true;
  // The activation may resume (and destroy) the awaiter as soon as the
  // message is posted: nothing of it is touched after.
  sink_->Post(std::exchange(message_, nullptr));
  return false;
}

void StreamResumer::ResumeUnlocked() {
  ScopedTurn outside(nullptr);  // the coroutine runs outside any activation
  handle_.resume();
}

StreamResumer::~StreamResumer() {
  delete message_;  // not posted: the frame is destroyed without resuming
}

ReadAwaiter::~ReadAwaiter() {
  // Only this coroutine's thread sets suspended_; the channel knows whether
  // it still holds the awaiter.
  if (suspended_) ch_->ForgetReadWaiter(this);
}

bool ReadAwaiter::Take() {
  if (ch_ == nullptr) {
    *end_ = absl::FailedPreconditionError("empty stream");
    return true;
  }
  StreamItem item;
  switch (ch_->TryRead(&item, end_)) {
    case StreamChannel::Read::kItem:
      out_->CopyFrom(*item);
      got_ = true;
      return true;
    case StreamChannel::Read::kEnd:
      return true;
    case StreamChannel::Read::kEmpty:
      break;
  }
  return false;
}

bool ReadAwaiter::await_suspend(std::coroutine_handle<> h) {
  Prepare(h);
  suspended_ = true;
  if (ch_->WaitReadable(this)) return true;
  // An item (or the end) came since await_ready: go on at once.
  suspended_ = false;
  return false;
}

WriteAwaiter::~WriteAwaiter() {
  if (suspended_) ch_->ForgetRoomWaiter(this);
}

bool WriteAwaiter::await_suspend(std::coroutine_handle<> h) {
  if (ch_ == nullptr) {
    result = absl::FailedPreconditionError("the stream writer is empty");
    return false;
  }
  Prepare(h);
  suspended_ = true;
  if (ch_->PushOrWait(this)) return true;
  suspended_ = false;
  return false;
}

StreamWriterBase::StreamWriterBase(CallBase* call) : call_(call) {
  call_->AddRef();
  call_->stream()->AddWriter();
}

StreamWriterBase::StreamWriterBase(const StreamWriterBase& o) : call_(o.call_) {
  if (call_ == nullptr) return;
  call_->AddRef();
  call_->stream()->AddWriter();
}

StreamWriterBase::~StreamWriterBase() {
  if (call_ == nullptr) return;
  // The last writer gone: the grain is done with the stream.
  if (call_->stream()->ReleaseWriter()) call_->Fail(absl::OkStatus());
  call_->Release();
}

StreamChannel* StreamWriterBase::channel() const {
  return call_ != nullptr ? call_->stream() : nullptr;
}

absl::Status StreamWriterBase::TryWrite(StreamItem item) const {
  if (call_ == nullptr) {
    return absl::FailedPreconditionError("the stream writer is empty");
  }
  return call_->stream()->TryPush(std::move(item));
}

void StreamWriterBase::Finish(absl::Status status) const {
  if (call_ != nullptr) call_->Fail(std::move(status));
}

bool StreamWriterBase::done() const {
  return call_ == nullptr || call_->stream()->closed();
}

size_t StreamWriterBase::queued() const {
  return call_ == nullptr ? 0 : call_->stream()->size();
}

}  // namespace internal
}  // namespace granary
