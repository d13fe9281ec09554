// The option table (silo/silo_host_option_table.h) makes the flags and the
// fields of SiloHostOptions: every row is a flag with the row's default and
// help, the defaults the flags give are SiloHostOptions' own, and a flag's
// value reaches its field.
#include "silo/silo_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/reflection.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "silo/silo_host_options.h"

ABSL_DECLARE_FLAG(int32_t, max_mailbox);
ABSL_DECLARE_FLAG(absl::Duration, idle_timeout);
ABSL_DECLARE_FLAG(std::string, cluster_id);
ABSL_DECLARE_FLAG(bool, network_turns);
ABSL_DECLARE_FLAG(std::vector<std::string>, http_hosts);
ABSL_DECLARE_FLAG(int32_t, turn_budget);
ABSL_DECLARE_FLAG(std::string, labels);
ABSL_DECLARE_FLAG(std::vector<std::string>, grain_types);

namespace granary::silo {
namespace {

// A value as its flag prints it.
template <typename T>
std::string Unparse(const T& value) {
  return absl::UnparseFlag<T>(value);
}

TEST(SiloFlagsTest, EveryRowIsAFlagWithTheFieldsDefault) {
  const SiloHostOptions defaults;
  int rows = 0;
#define CHECK_ROW(type, name, default_value, help)                        \
  {                                                                       \
    ++rows;                                                               \
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(#name); \
    ASSERT_NE(flag, nullptr) << #name;                                    \
    EXPECT_EQ(flag->DefaultValue(), Unparse(defaults.name)) << #name;     \
    EXPECT_EQ(flag->Help(), help) << #name;                               \
  }
  GRANARY_SILO_HOST_OPTIONS(CHECK_ROW)
#undef CHECK_ROW
  EXPECT_GT(rows, 60);
}

TEST(SiloFlagsTest, TheFlagsGiveTheDefaultsAndEachValueReachesItsField) {
  absl::StatusOr<SiloHostOptions> o = SiloHostOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  const SiloHostOptions defaults;
#define SAME(type, name, default_value, help) \
  EXPECT_EQ(Unparse(o->name), Unparse(defaults.name)) << #name;
  GRANARY_SILO_HOST_OPTIONS(SAME)
#undef SAME

  absl::SetFlag(&FLAGS_max_mailbox, 7);
  absl::SetFlag(&FLAGS_turn_budget, 3);
  absl::SetFlag(&FLAGS_idle_timeout, absl::Seconds(3));
  absl::SetFlag(&FLAGS_cluster_id, std::string("blue"));
  absl::SetFlag(&FLAGS_network_turns, false);
  absl::SetFlag(&FLAGS_http_hosts, std::vector<std::string>{"a.example"});
  o = SiloHostOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_mailbox, 7);
  EXPECT_EQ(o->turn_budget, 3);
  EXPECT_EQ(o->idle_timeout, absl::Seconds(3));
  EXPECT_EQ(o->cluster_id, "blue");
  EXPECT_FALSE(o->network_turns);
  EXPECT_EQ(o->http_hosts, std::vector<std::string>{"a.example"});

  // A bad value is refused, naming its flag.
  absl::SetFlag(&FLAGS_turn_budget, 0);
  o = SiloHostOptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("--turn_budget"), std::string::npos);
}

// --labels and --grain_types: parsed and checked before the silo starts;
// bad ones name their flag.
TEST(SiloFlagsTest, LabelsAndGrainTypesAreCheckedNamingTheirFlag) {
  absl::SetFlag(&FLAGS_turn_budget, 1);
  absl::SetFlag(&FLAGS_labels, std::string("zone=a,role=billing"));
  absl::SetFlag(&FLAGS_grain_types,
                std::vector<std::string>{"granary.examples.Counter"});
  absl::StatusOr<SiloHostOptions> o = SiloHostOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->labels, "zone=a,role=billing");
  EXPECT_EQ(o->grain_types,
            std::vector<std::string>{"granary.examples.Counter"});
  for (const char* bad : {"zone", "zone=a,zone=b", "Zone=a", "zone=a b"}) {
    absl::SetFlag(&FLAGS_labels, std::string(bad));
    o = SiloHostOptionsFromFlags();
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(o.status().message().find("--labels"), std::string::npos)
        << o.status();
  }
  absl::SetFlag(&FLAGS_labels, std::string());
  absl::SetFlag(&FLAGS_grain_types, std::vector<std::string>{""});
  o = SiloHostOptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--grain_types"), std::string::npos)
      << o.status();
  absl::SetFlag(&FLAGS_grain_types, std::vector<std::string>{});
}

}  // namespace
}  // namespace granary::silo
