// File: core/frame_pool.h
// -----------------------------------------------------------------------------
// Where Task coroutine frames (core/task.h) come from: a small cache per
// thread of freed frames, by size class, in front of operator new.
//
// Every grain method, grain call and call filter is a coroutine whose frame
// is allocated when it starts and freed when it ends, often on another
// thread (a call's reply resumes its caller on whichever worker runs it).
// Through malloc those frees land in the freeing thread's small per-size
// cache, which fills, and the rest take the allocator's shared path. Here a
// thread keeps up to kFramesPerClass freed frames of each size class and
// gives them to the next frames of that class it starts, so the frames of
// a call chain cycle through a few warm blocks. Frames above kMaxPooledFrame
// bytes, and frees past a full class, go to operator new/delete.
//
// Bounded: at most kClasses * kFramesPerClass * kMaxPooledFrame bytes
// (256 KiB) per thread; a thread's cache is freed when the thread exits.
// Under AddressSanitizer and ThreadSanitizer frames are not pooled, so
// every frame's lifetime stays visible to them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace granary::internal {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GRANARY_POOL_FRAMES 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define GRANARY_POOL_FRAMES 0
#endif
#endif
#ifndef GRANARY_POOL_FRAMES
#define GRANARY_POOL_FRAMES 1
#endif

inline constexpr size_t kFrameGranule = 64;
inline constexpr size_t kFrameClasses = 16;
inline constexpr size_t kMaxPooledFrame = kFrameGranule * kFrameClasses;
inline constexpr uint32_t kFramesPerClass = 16;

struct FrameCache {
  struct Node {
    Node* next;
  };
  Node* head[kFrameClasses];
  uint32_t count[kFrameClasses];
  // 0: nothing cached yet (no exit hook); 1: open; 2: the thread is
  // exiting (frees go to operator delete).
  uint32_t state;
};

// Constant-initialized and trivially destructible: no guard on access.
inline thread_local constinit FrameCache frame_cache{};

// Registers the thread-exit hook that frees `frame_cache` (core/frame_pool.cc).
void OpenFrameCache();

inline void* AllocateFrame(size_t size) {
#if GRANARY_POOL_FRAMES
  if (size <= kMaxPooledFrame) {
    const size_t c = (size - 1) / kFrameGranule;
    FrameCache& cache = frame_cache;
    if (FrameCache::Node* n = cache.head[c]) {
      cache.head[c] = n->next;
      --cache.count[c];
      return n;
    }
    // Whole granules: any frame of the class fits the block later.
    return ::operator new((c + 1) * kFrameGranule);
  }
#endif
  return ::operator new(size);
}

inline void FreeFrame(void* p, size_t size) noexcept {
#if GRANARY_POOL_FRAMES
  if (size <= kMaxPooledFrame) {
    const size_t c = (size - 1) / kFrameGranule;
    FrameCache& cache = frame_cache;
    if (cache.count[c] < kFramesPerClass && cache.state != 2) {
      if (cache.state == 0) OpenFrameCache();
      auto* n = static_cast<FrameCache::Node*>(p);
      n->next = cache.head[c];
      cache.head[c] = n;
      ++cache.count[c];
      return;
    }
  }
#else
  (void)size;
#endif
  ::operator delete(p);
}

}  // namespace granary::internal
