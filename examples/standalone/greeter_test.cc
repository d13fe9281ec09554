// A unit test of the Greeter grain on granary::testing's InProcessCluster:
// three silos in this process on a clock the test moves, no network, no
// disk. The grain's greetings count survives the crash of its silo (the
// cluster's silos share one store, as they would a database).
#include "greeter_grain.h"
#include "gtest/gtest.h"
#include "testing/in_process_cluster.h"

namespace granary::standalone {
namespace {

absl::StatusOr<Greeting> Greet(silo::Runtime& silo, const std::string& key,
                               const std::string& name) {
  GreetRequest request;
  request.set_name(name);
  return silo.Get<GreeterRef>(key).Greet(request).Get();
}

TEST(GreeterTest, GreetsCountsAndRemembersAcrossACrash) {
  testing::InProcessClusterOptions options;
  options.silos = 3;
  options.grains = [](silo::SiloHost& host) {
    ASSERT_TRUE(host.AddGrain<GreeterGrain>().ok());
  };
  testing::InProcessCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());

  absl::StatusOr<Greeting> first = Greet(cluster.silo(0), "alice", "Ada");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->text(), "Hello, Ada, from alice!");
  EXPECT_EQ(first->greetings(), 1);

  int home = -1;
  for (int i = 0; i < cluster.size(); ++i) {
    if (cluster.silo(i).ActivationCount() == 1) home = i;
  }
  ASSERT_GE(home, 0);
  cluster.Kill(home);
  const int survivor = (home + 1) % cluster.size();
  absl::StatusOr<Greeting> second =
      Greet(cluster.silo(survivor), "alice", "Grace");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->greetings(), 2);
}

TEST(GreeterTest, AnEmptyNameIsRefused) {
  testing::InProcessClusterOptions options;
  options.silos = 1;
  options.grains = [](silo::SiloHost& host) {
    ASSERT_TRUE(host.AddGrain<GreeterGrain>().ok());
  };
  testing::InProcessCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  absl::StatusOr<Greeting> refused = Greet(cluster.silo(0), "bob", "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace granary::standalone
