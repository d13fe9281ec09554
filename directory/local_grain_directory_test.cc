#include "directory/local_grain_directory.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace granary::directory {
namespace {

TEST(LocalGrainDirectoryTest, FirstRegistrationWins) {
  LocalGrainDirectory dir;
  GrainId id("t.T", "k");
  ActivationAddress a{"s1", 1}, b{"s1", 2};
  EXPECT_EQ(*dir.RegisterIfAbsent(id, a), a);
  EXPECT_EQ(*dir.RegisterIfAbsent(id, b), a);
  EXPECT_EQ(*dir.Lookup(id), a);
  EXPECT_EQ(dir.size(), 1u);
}

TEST(LocalGrainDirectoryTest, UnregisterOnlyRemovesItsOwnEntry) {
  LocalGrainDirectory dir;
  GrainId id("t.T", "k");
  ActivationAddress a{"s1", 1}, b{"s1", 2};
  ASSERT_TRUE(dir.RegisterIfAbsent(id, a).ok());
  EXPECT_TRUE(dir.Unregister(id, b).ok());
  EXPECT_EQ(*dir.Lookup(id), a);
  EXPECT_TRUE(dir.Unregister(id, a).ok());
  EXPECT_EQ(dir.Lookup(id).status().code(), absl::StatusCode::kNotFound);
}

TEST(LocalGrainDirectoryTest, ConcurrentRegistrationsAgreeOnOneWinner) {
  LocalGrainDirectory dir;
  GrainId id("t.T", "contended");
  std::vector<std::thread> threads;
  std::vector<ActivationAddress> seen(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      seen[i] = *dir.RegisterIfAbsent(id, ActivationAddress{"s", uint64_t(i + 1)});
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : seen) EXPECT_EQ(s, seen[0]);
}

}  // namespace
}  // namespace granary::directory
