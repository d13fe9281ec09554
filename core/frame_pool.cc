#include "core/frame_pool.h"

namespace granary::internal {
namespace {

// Frees this thread's cached frames when the thread exits; frames freed
// after that go straight to operator delete.
struct FrameCacheCloser {
  ~FrameCacheCloser() {
    FrameCache& cache = frame_cache;
    cache.state = 2;
    for (size_t c = 0; c < kFrameClasses; ++c) {
      while (FrameCache::Node* n = cache.head[c]) {
        cache.head[c] = n->next;
        ::operator delete(n);
      }
      cache.count[c] = 0;
    }
  }
};

}  // namespace

void OpenFrameCache() {
  thread_local FrameCacheCloser closer;
  (void)closer;
  frame_cache.state = 1;
}

}  // namespace granary::internal
