#include "core/frame_pool.h"

#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "core/task.h"
#include "gtest/gtest.h"

namespace granary::internal {
namespace {

#if GRANARY_POOL_FRAMES

TEST(FramePoolTest, AFreedFrameServesTheNextOfItsClass) {
  void* a = AllocateFrame(100);
  std::memset(a, 0xab, 100);
  FreeFrame(a, 100);
  // 100 and 120 bytes are one class (65..128): the block comes back.
  void* b = AllocateFrame(120);
  EXPECT_EQ(a, b);
  std::memset(b, 0xcd, 120);  // the whole class fits the block
  // Another class does not take it.
  FreeFrame(b, 120);
  void* c = AllocateFrame(40);
  EXPECT_NE(c, b);
  FreeFrame(c, 40);
  void* d = AllocateFrame(128);
  EXPECT_EQ(d, b);
  FreeFrame(d, 128);
}

TEST(FramePoolTest, AClassHoldsAtMostItsBound) {
  const size_t size = 300;
  const size_t c = (size - 1) / kFrameGranule;
  std::vector<void*> frames;
  for (uint32_t i = 0; i < 3 * kFramesPerClass; ++i) {
    frames.push_back(AllocateFrame(size));
  }
  for (void* f : frames) FreeFrame(f, size);
  EXPECT_EQ(frame_cache.count[c], kFramesPerClass);
  // What the cache holds are distinct blocks, handed out again.
  std::set<void*> again;
  for (uint32_t i = 0; i < kFramesPerClass; ++i) {
    again.insert(AllocateFrame(size));
  }
  EXPECT_EQ(again.size(), kFramesPerClass);
  EXPECT_EQ(frame_cache.count[c], 0u);
  for (void* f : again) FreeFrame(f, size);
}

TEST(FramePoolTest, LargeFramesAreNotPooled) {
  const size_t c0 = frame_cache.count[kFrameClasses - 1];
  void* big = AllocateFrame(kMaxPooledFrame + 1);
  FreeFrame(big, kMaxPooledFrame + 1);
  EXPECT_EQ(frame_cache.count[kFrameClasses - 1], c0);
}

TEST(FramePoolTest, AFrameFreedOnAnotherThreadJoinsThatThreadsCache) {
  void* frame = AllocateFrame(200);
  const size_t c = (200 - 1) / kFrameGranule;
  uint32_t there = 0;
  std::thread t([&] {
    FreeFrame(frame, 200);
    there = frame_cache.count[c];
    void* again = AllocateFrame(200);
    EXPECT_EQ(again, frame);
    FreeFrame(again, 200);
  });  // the thread's exit frees its cache
  t.join();
  EXPECT_EQ(there, 1u);
}

#endif  // GRANARY_POOL_FRAMES

Task<int> Leaf(int v) { co_return v; }

Task<int> Tree(int depth) {
  if (depth == 0) co_return 1;
  // Frames of two sizes, nested, freed in and out of order.
  const int left = co_await Tree(depth - 1);
  const int right = co_await Leaf(depth);
  co_return left + right;
}

TEST(FramePoolTest, TasksAcrossThreadsComputeTheirResults) {
  std::vector<std::thread> threads;
  std::vector<int> results(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([i, &results] {
      int total = 0;
      for (int n = 0; n < 2000; ++n) {
        total += *Tree(6).Get();
      }
      results[i] = total;
    });
  }
  for (std::thread& t : threads) t.join();
  // Tree(d) = Tree(d-1) + d, Tree(0) = 1: 1 + 21 = 22.
  for (int r : results) EXPECT_EQ(r, 2000 * 22);
}

}  // namespace
}  // namespace granary::internal
