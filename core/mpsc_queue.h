// File: core/mpsc_queue.h
// -----------------------------------------------------------------------------
// An intrusive, unbounded, lock-free multi-producer single-consumer queue
// (Vyukov's design). Push is one atomic exchange; Pop is wait-free for the
// single consumer. Used as the mailbox of an activation.
//
//   struct Item : MpscNode { int v; };
//   MpscQueue<Item> q;
//   q.Push(new Item{...});            // any thread
//   if (Item* it = q.Pop()) { ... }   // the one consumer
//
// Pop may return nullptr while a producer is between its two steps; the
// producer then completes its push and the item is seen by a later Pop.
// Callers pair the queue with a "scheduled" flag that the producer sets
// after Push (see silo/runtime/activation.h), so no item is ever stranded.
#pragma once

#include <atomic>

namespace granary {

struct MpscNode {
  std::atomic<MpscNode*> mpsc_next{nullptr};
};

template <typename T>
class MpscQueue {
 public:
  MpscQueue() : head_(&stub_), tail_(&stub_) {}
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  void Push(T* item) { PushNode(item); }

  // Consumer only.
  T* Pop() {
    MpscNode* tail = tail_;
    MpscNode* next = tail->mpsc_next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = next;
      tail = next;
      next = next->mpsc_next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      return static_cast<T*>(tail);
    }
    MpscNode* head = head_.load(std::memory_order_acquire);
    if (tail != head) return nullptr;  // a producer is mid-push
    PushNode(&stub_);  // re-insert the stub behind the last item
    next = tail->mpsc_next.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return static_cast<T*>(tail);
    }
    return nullptr;
  }

  // Consumer only. True when no item is queued and no push is under way.
  bool Empty() const {
    return tail_ == &stub_ &&
           stub_.mpsc_next.load(std::memory_order_acquire) == nullptr &&
           head_.load(std::memory_order_acquire) == &stub_;
  }

 private:
  void PushNode(MpscNode* n) {
    n->mpsc_next.store(nullptr, std::memory_order_relaxed);
    MpscNode* prev = head_.exchange(n, std::memory_order_acq_rel);
    prev->mpsc_next.store(n, std::memory_order_release);
  }

  std::atomic<MpscNode*> head_;  // producers push here
  MpscNode* tail_;               // consumer pops here
  MpscNode stub_;                // linked into the list, never returned
};

}  // namespace granary
