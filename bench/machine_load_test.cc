#include "bench/machine_load.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace granary::bench {
namespace {

TEST(MachineLoadTest, ParsesTheCpuLineOfProcStat) {
  int64_t busy = 0, steal = 0;
  ASSERT_TRUE(
      ParseProcStatCpu("cpu  100 5 20 9000 7 3 2 11 0 0", &busy, &steal));
  EXPECT_EQ(busy, 100 + 5 + 20);  // idle, iowait, irq, softirq left out
  EXPECT_EQ(steal, 11);
}

TEST(MachineLoadTest, RefusesWhatIsNotTheCpuLine) {
  int64_t busy = 0, steal = 0;
  for (const char* bad : {"", "cpu", "cpu0 1 2 3 4 5 6 7 8",
                          "cpu  1 2 3 4 5 6 7", "cpu  1 2 x 4 5 6 7 8",
                          "cpu  1 2 -3 4 5 6 7 8", "intr 1 2 3 4 5 6 7 8 9",
                          "cpu  99999999999999999999999 0 0 0 0 0 0 0"}) {
    EXPECT_FALSE(ParseProcStatCpu(bad, &busy, &steal)) << bad;
  }
}

TEST(MachineLoadTest, ParsesAProcessStatWithSpacesAndParenthesesInItsName) {
  int64_t ticks = 0;
  int ppid = 0;
  ASSERT_TRUE(ParseProcPidStat(
      "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 3",
      &ppid, &ticks));
  EXPECT_EQ(ppid, 17);
  EXPECT_EQ(ticks, 37 + 5);
}

TEST(MachineLoadTest, RefusesABrokenProcessStat) {
  int64_t ticks = 0;
  int ppid = 0;
  for (const char* bad :
       {"", "4242 (x S 1 2 3 4 5 6 7 8 9 10 11 12 13", "4242 (x) S 1 2 3",
        "4242 (x) S 1 2 3 4 5 6 7 8 9 10 y 12",
        "4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 -1",
        "4242 (x) S p 2 3 4 5 6 7 8 9 10 11 12"}) {
    EXPECT_FALSE(ParseProcPidStat(bad, &ppid, &ticks)) << bad;
  }
}

TEST(MachineLoadTest, ThisProcessIsNotOtherWork) {
  const int self = static_cast<int>(getpid());
  const LoadReading before = ReadLoad({self});
  ASSERT_TRUE(before.valid);
  // Busy on this thread for a while: its ticks are its own.
  volatile uint64_t x = 1;
  for (int i = 0; i < 50000000; ++i) x = x * 6364136223846793005u + 1;
  const LoadUse use = LoadSince(before, ReadLoad({self}));
  EXPECT_GT(use.wall_ns, 0);
  EXPECT_GE(use.other_ticks, 0);
  EXPECT_GE(use.OtherCores(), 0);
}

TEST(MachineLoadTest, AChildsTimeIsItsParentsOwn) {
  // A child that burns CPU: watching this process, its ticks are own work;
  // watching nothing, they are other work.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    volatile uint64_t x = 1;
    for (;;) x = x * 6364136223846793005u + 1;
  }
  const int self = static_cast<int>(getpid());
  const LoadReading a = ReadLoad({self});
  const LoadReading b = ReadLoad({});
  usleep(300000);
  const LoadReading a2 = ReadLoad({self});
  const LoadReading b2 = ReadLoad({});
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  const int64_t watched = a2.own_ticks - a.own_ticks;
  const int64_t unwatched = b2.own_ticks - b.own_ticks;
  EXPECT_EQ(unwatched, 0);
  // About 30 ticks at 100 Hz; some, whatever the machine's load.
  EXPECT_GT(watched, 0);
}

TEST(MachineLoadTest, InvalidReadingsGiveNothing) {
  LoadReading valid = ReadLoad({});
  const LoadUse use = LoadSince(LoadReading{}, valid);
  EXPECT_EQ(use.other_ticks, 0);
  EXPECT_EQ(use.wall_ns, 0);
  EXPECT_EQ(use.OtherCores(), 0);
  EXPECT_EQ(use.StealCores(), 0);
}

TEST(MachineLoadTest, CoresAreTicksOverWallTime) {
  LoadReading a, b;
  a.valid = b.valid = true;
  a.busy_ticks = 1000;
  b.busy_ticks = 1000 + 150;  // 1.5 s of CPU at 100 ticks/s
  a.own_ticks = 10;
  b.own_ticks = 10 + 50;  // 0.5 s of it the benchmark's
  b.steal_ticks = 20;
  a.mono_ns = 0;
  b.mono_ns = 1'000'000'000;
  const LoadUse use = LoadSince(a, b);
  EXPECT_EQ(use.other_ticks, 100);
  EXPECT_EQ(use.steal_ticks, 20);
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  EXPECT_DOUBLE_EQ(use.OtherCores(), 100 / hz);
  EXPECT_DOUBLE_EQ(use.StealCores(), 20 / hz);
  // Own time beyond the machine's (accounting skew) is no negative load.
  b.own_ticks = 10000;
  EXPECT_EQ(LoadSince(a, b).other_ticks, 0);
}

}  // namespace
}  // namespace granary::bench
