#include "directory/local_grain_directory.h"

#include <atomic>
#include <thread>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

using ::granary::matchers::StatusIs;

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
  EXPECT_THAT(dir.Lookup(id), StatusIs(absl::StatusCode::kNotFound));
}

TEST(LocalGrainDirectoryTest, ConcurrentRegistrationsAgreeOnOneWinner) {
  LocalGrainDirectory dir;
  GrainId id("t.T", "contended");
  std::vector<std::thread> threads;
  std::vector<ActivationAddress> seen(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      seen[i] =
          *dir.RegisterIfAbsent(id, ActivationAddress{"s", uint64_t(i + 1)});
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : seen) EXPECT_EQ(s, seen[0]);
}

TEST(LocalGrainDirectoryTest, ADeadSilosEntriesArePurgedAndRangesExtracted) {
  LocalGrainDirectory dir;
  for (int i = 0; i < 30; ++i) {
    const std::string silo = i % 3 == 0 ? "dead@1" : "alive@1";
    ASSERT_TRUE(dir.RegisterIfAbsent(GrainId("t.T", std::to_string(i)),
                                     ActivationAddress{silo, uint64_t(i + 1)})
                    .ok());
  }
  EXPECT_EQ(dir.RemoveSilo("dead@1"), 10u);
  EXPECT_EQ(dir.RemoveSilo("dead@1"), 0u);
  EXPECT_EQ(dir.size(), 20u);
  EXPECT_THAT(dir.Lookup(GrainId("t.T", "0")),
              StatusIs(absl::StatusCode::kNotFound));
  // Hand over the even keys.
  auto moved = dir.Extract(
      [](const GrainId& id) { return std::stoi(id.key()) % 2 == 0; });
  EXPECT_EQ(moved.size(), 10u);
  for (const auto& [id, address] : moved) {
    EXPECT_EQ(std::stoi(id.key()) % 2, 0);
    EXPECT_EQ(address.silo, "alive@1");
    EXPECT_THAT(dir.Lookup(id), StatusIs(absl::StatusCode::kNotFound));
  }
  EXPECT_EQ(dir.size(), 10u);
}

}  // namespace
}  // namespace granary::directory
