// File: examples/chat_grain.h
// -----------------------------------------------------------------------------
// granary.examples.Chat: a chat room, the example of server push. Post
// writes a message to every watcher (an ObserverSet); Watch replays the
// recent messages and then keeps the caller's stream.
//
//   silo.AddGrain<granary::examples::ChatGrain>();
#pragma once

#include <cstdint>
#include <deque>

#include "absl/time/clock.h"
#include "core/stream.h"
#include "examples/chat.grain.h"

namespace granary::examples {

class ChatGrain final : public ChatGrainBase {
 public:
  // Messages a new watcher gets replayed.
  static constexpr size_t kHistory = 32;

  Task<PostReply> Post(const PostRequest& request) override;
  Task<void> Watch(const WatchRequest& request,
                   StreamWriter<ChatMessage> stream) override;

 private:
  // Past any seq an earlier activation of the room gave (chat.proto).
  uint64_t next_seq_ = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  std::deque<ChatMessage> history_;
  ObserverSet<ChatMessage> watchers_;
};

}  // namespace granary::examples
