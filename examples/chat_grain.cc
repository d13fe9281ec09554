#include "examples/chat_grain.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status.h"

namespace granary::examples {

Task<PostReply> ChatGrain::Post(const PostRequest& request) {
  if (request.author().empty() || request.author().size() > 64) {
    throw StatusError(
        absl::InvalidArgumentError("author must be 1 to 64 bytes"));
  }
  if (request.text().empty() || request.text().size() > 4096) {
    throw StatusError(
        absl::InvalidArgumentError("text must be 1 to 4096 bytes"));
  }
  ChatMessage message;
  message.set_seq(next_seq_++);
  message.set_author(request.author());
  message.set_text(request.text());
  message.set_sent_unix_ns(absl::ToUnixNanos(absl::Now()));
  history_.push_back(message);
  if (history_.size() > kHistory) history_.pop_front();
  PostReply reply;
  reply.set_seq(message.seq());
  reply.set_delivered(
      static_cast<uint32_t>(watchers_.Publish(std::move(message))));
  co_return reply;
}

Task<void> ChatGrain::Watch(const WatchRequest& request,
                            StreamWriter<ChatMessage> stream) {
  for (const ChatMessage& m : history_) {
    if (m.seq() <= request.after_seq()) continue;
    // Waits while the watcher's buffer is full (at most kHistory items).
    absl::Status written = co_await stream.Write(m);
    if (!written.ok()) co_return;  // the watcher went away
  }
  watchers_.Add(std::move(stream));
}

}  // namespace granary::examples
