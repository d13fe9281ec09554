#include "directory/lookup_cache.h"

#include "gtest/gtest.h"

namespace granary::directory {
namespace {

TEST(LookupCacheTest, RemembersForgetsAndKeepsOnlyLiveSilos) {
  LookupCache cache(10);
  const GrainId a("t", "a"), b("t", "b");
  EXPECT_EQ(cache.Find(a), nullptr);
  cache.Remember(a, "s1");
  cache.Remember(b, "s2");
  ASSERT_NE(cache.Find(a), nullptr);
  EXPECT_EQ(*cache.Find(a), "s1");
  cache.Remember(a, "s3");  // moved
  EXPECT_EQ(*cache.Find(a), "s3");
  cache.KeepOnly({"s2"});
  EXPECT_EQ(cache.Find(a), nullptr);
  ASSERT_NE(cache.Find(b), nullptr);
  cache.Forget(b);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(LookupCacheTest, AFullCacheStartsOver) {
  LookupCache cache(2);
  cache.Remember(GrainId("t", "1"), "s");
  cache.Remember(GrainId("t", "2"), "s");
  cache.Remember(GrainId("t", "3"), "s");
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_NE(cache.Find(GrainId("t", "3")), nullptr);
}

}  // namespace
}  // namespace granary::directory
