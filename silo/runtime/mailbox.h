// File: silo/runtime/mailbox.h
// -----------------------------------------------------------------------------
// The FIFO of messages an activation has taken from its mailbox but not yet
// run (requests waiting behind a suspended one, replies to deliver). A vector
// with a moving head: no allocation while it stays empty, which is the common
// case, and cheap removal from the middle when a reentrant request jumps the
// queue. Used by one worker at a time.
#pragma once

#include <cstddef>
#include <vector>

#include "core/call.h"

namespace granary::silo {

class MessageFifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  void push_back(Message* m) { items_.push_back(m); }
  void push_front(Message* m) {
    if (head_ > 0) {
      items_[--head_] = m;
    } else {
      items_.insert(items_.begin(), m);
    }
  }
  Message* pop_front() {
    Message* m = items_[head_++];
    if (head_ == items_.size()) clear();
    return m;
  }
  // The i-th message from the front.
  Message* at(size_t i) const { return items_[head_ + i]; }
  // Removes and returns the i-th message from the front.
  Message* take(size_t i) {
    if (i == 0) return pop_front();
    Message* m = items_[head_ + i];
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(head_ + i));
    return m;
  }
  void clear() {
    items_.clear();
    head_ = 0;
  }
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (size_t i = head_; i < items_.size(); ++i) fn(items_[i]);
  }

 private:
  std::vector<Message*> items_;
  size_t head_ = 0;
};

}  // namespace granary::silo
