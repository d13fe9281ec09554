// The consistent-hash ring: the same owner in every process, an even spread
// over silos, and only the keys of a joining or leaving silo move.
#include "directory/hash_ring.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace granary::directory {
namespace {

constexpr absl::string_view kType = "test.Grain";

std::vector<std::string> Silos(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(absl::StrCat("127.0.0.1:", 11111 + i, "@1700000000000"));
  }
  return out;
}

TEST(HashRingTest, HashesAreFixedAcrossProcesses) {
  // Golden values: every silo, every build, must agree (a change here
  // reshuffles the directory of a cluster running mixed versions).
  EXPECT_EQ(StableHash(""), 0x552d3fb62b3c344full);
  EXPECT_EQ(StableHash("granary"), 0x1e3f4bfd8f6809d7ull);
  const uint64_t a = GrainHash(GrainId(kType, "alice"));
  EXPECT_EQ(a, 0x602d3e7c18d4210full);
  EXPECT_NE(a, GrainHash(GrainId(kType, "alicf")));
  EXPECT_NE(a, GrainHash(GrainId("test.Other", "alice")));
  // Type and key are separated: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(GrainHash(GrainId("ab", "c")), GrainHash(GrainId("a", "bc")));
}

TEST(HashRingTest, OwnershipIsTheSameWhateverTheMemberOrder) {
  std::vector<std::string> silos = Silos(5);
  HashRing a(silos);
  std::reverse(silos.begin(), silos.end());
  silos.push_back(silos.front());  // a duplicate changes nothing
  HashRing b(silos);
  EXPECT_EQ(b.members().size(), 5u);
  for (int i = 0; i < 1000; ++i) {
    GrainId id(kType, absl::StrCat("g", i));
    EXPECT_EQ(a.OwnerOf(id), b.OwnerOf(id));
  }
}

TEST(HashRingTest, KeysSpreadEvenlyOverSilos) {
  HashRing ring(Silos(3));
  std::map<std::string, int> counts;
  constexpr int kKeys = 30000;
  for (int i = 0; i < kKeys; ++i) {
    ++counts[ring.OwnerOf(GrainId(kType, absl::StrCat("k", i)))];
  }
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [silo, n] : counts) {
    // 64 virtual nodes each: within ±25 % of a third.
    EXPECT_GT(n, kKeys / 3 * 3 / 4) << silo;
    EXPECT_LT(n, kKeys / 3 * 5 / 4) << silo;
  }
}

TEST(HashRingTest, OnlyTheKeysOfAJoiningOrLeavingSiloMove) {
  std::vector<std::string> three = Silos(3);
  std::vector<std::string> four = Silos(4);
  HashRing before(three), after(four);
  int moved = 0;
  constexpr int kKeys = 20000;
  for (int i = 0; i < kKeys; ++i) {
    GrainId id(kType, absl::StrCat("k", i));
    const std::string& was = before.OwnerOf(id);
    const std::string& is = after.OwnerOf(id);
    if (was != is) {
      ++moved;
      EXPECT_EQ(is, four[3]) << "a key moved between silos that stayed";
    }
  }
  // About a quarter moves to the new silo; nothing else does.
  EXPECT_GT(moved, kKeys / 8);
  EXPECT_LT(moved, kKeys / 2);
}

TEST(HashRingTest, AnEmptyRingOwnsNothing) {
  HashRing ring({});
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.OwnerOf(GrainId(kType, "x")), "");
  HashRing one({"solo@1"});
  EXPECT_EQ(one.OwnerOf(GrainId(kType, "x")), "solo@1");
}

}  // namespace
}  // namespace granary::directory
