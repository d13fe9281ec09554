#include "core/mpsc_queue.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace granary {
namespace {

struct Item : MpscNode {
  int producer = 0;
  int seq = 0;
};

TEST(MpscQueueTest, FifoSingleThread) {
  MpscQueue<Item> q;
  EXPECT_TRUE(q.Empty());
  EXPECT_EQ(q.Pop(), nullptr);
  Item items[3];
  for (int i = 0; i < 3; ++i) {
    items[i].seq = i;
    q.Push(&items[i]);
  }
  EXPECT_FALSE(q.Empty());
  for (int i = 0; i < 3; ++i) {
    Item* it = q.Pop();
    ASSERT_NE(it, nullptr);
    EXPECT_EQ(it->seq, i);
  }
  EXPECT_EQ(q.Pop(), nullptr);
  EXPECT_TRUE(q.Empty());
}

TEST(MpscQueueTest, ManyProducersKeepPerProducerOrder) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 50000;
  MpscQueue<Item> q;
  std::vector<Item> items(kProducers * kPerProducer);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        Item& it = items[p * kPerProducer + i];
        it.producer = p;
        it.seq = i;
        q.Push(&it);
      }
    });
  }
  std::vector<int> next(kProducers, 0);
  int received = 0;
  while (received < kProducers * kPerProducer) {
    Item* it = q.Pop();
    if (it == nullptr) continue;
    ASSERT_EQ(it->seq, next[it->producer]) << "producer " << it->producer;
    ++next[it->producer];
    ++received;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(q.Pop(), nullptr);
}

}  // namespace
}  // namespace granary
