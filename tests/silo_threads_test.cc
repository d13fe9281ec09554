// Threads per silo, counted in /proc on real granary-silo processes with
// the default flags (a dev cluster on 127.0.0.1): a silo's threads do not
// grow with the cluster (its peers share one timer thread and one
// reconnector), and the threads the silo starts itself and through its
// HTTP server and storage (every thread but gRPC's process-wide pool) are
// at most the workers + 16.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"

namespace granary::testing {
namespace {

using ::testing::HasSubstr;

// Threads of process `pid` by name (/proc/PID/task/*/comm).
std::map<std::string, int> ThreadsOf(pid_t pid) {
  std::map<std::string, int> out;
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  for (const auto& task : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(task.path() / "comm");
    std::string name;
    if (std::getline(in, name)) ++out[name];
  }
  return out;
}

int Total(const std::map<std::string, int>& threads) {
  int n = 0;
  for (const auto& [name, count] : threads) n += count;
  return n;
}

// gRPC's own threads: its timers, executors, event engine and callback
// pollers, one pool per process whatever the silo does.
bool IsGrpcThread(const std::string& name) {
  for (const char* prefix :
       {"grpc", "event_engine", "timer_manager", "default-executo",
        "resolver-execut", "nexting_thread"}) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

int SilosOwn(const std::map<std::string, int>& threads) {
  int n = 0;
  for (const auto& [name, count] : threads) {
    if (!IsGrpcThread(name)) n += count;
  }
  return n;
}

std::string Describe(const std::map<std::string, int>& threads) {
  std::vector<std::string> parts;
  for (const auto& [name, count] : threads) {
    parts.push_back(absl::StrCat(name, "=", count));
  }
  return absl::StrJoin(parts, " ");
}

// Silos the table shows active through `gateway`.
int ActiveSilos(const std::string& gateway) {
  int n = 0;
  for (absl::string_view line :
       absl::StrSplit(Cli(gateway, {"cluster"}).out, '\n')) {
    std::vector<absl::string_view> cols =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cols.size() > 2 && cols[2] == "active") ++n;
  }
  return n;
}

struct Silo {
  std::unique_ptr<SiloProcess> process;
  std::string gateway;
};

TEST(SiloThreadsTest, ThreadsPerSiloStayFlatAsTheClusterGrows) {
  const int workers = static_cast<int>(std::thread::hardware_concurrency());
  std::vector<Silo> silos;
  std::string primary;
  auto add = [&](int i) {
    std::vector<std::string> args = AnyPorts(TempDir(absl::StrCat("t-", i)));
    args.push_back("--cluster=dev");
    if (!primary.empty()) args.push_back("--primary=" + primary);
    auto process = std::make_unique<SiloProcess>(args);
    const std::string ready = process->ReadyLine();
    EXPECT_THAT(ready, HasSubstr("READY"));
    if (primary.empty()) primary = Field(ready, "silo");
    silos.push_back(Silo{std::move(process), Field(ready, "gateway")});
  };
  // Every silo sees `n` active, and has connected to the others.
  auto formed = [&](int n) {
    for (const Silo& s : silos) {
      if (!Eventually([&] { return ActiveSilos(s.gateway) == n; })) {
        return false;
      }
    }
    absl::SleepFor(absl::Seconds(2));  // connections made, pools settled
    return true;
  };

  add(0);
  add(1);
  ASSERT_TRUE(formed(2));
  const std::map<std::string, int> of_two = ThreadsOf(silos[1].process->pid());
  std::cout << "a silo of 2: " << Total(of_two) << " threads ("
            << SilosOwn(of_two) << " its own): " << Describe(of_two) << "\n";

  for (int i = 2; i < 8; ++i) add(i);
  ASSERT_EQ(silos.size(), 8u);
  ASSERT_TRUE(formed(8));
  const std::map<std::string, int> of_eight =
      ThreadsOf(silos[1].process->pid());
  std::cout << "the same silo of 8: " << Total(of_eight) << " threads ("
            << SilosOwn(of_eight) << " its own): " << Describe(of_eight)
            << "\n";
  // Six more peers add no thread of the silo's (gRPC's pool may wake one
  // more timer thread under the joins' load).
  EXPECT_LE(SilosOwn(of_eight), SilosOwn(of_two)) << Describe(of_eight);
  EXPECT_LE(Total(of_eight), Total(of_two) + 2) << Describe(of_eight);
  for (const Silo& s : silos) {
    const std::map<std::string, int> threads = ThreadsOf(s.process->pid());
    EXPECT_LE(SilosOwn(threads), workers + 16) << Describe(threads);
  }

  for (Silo& s : silos) s.process->Signal(SIGTERM);
  for (Silo& s : silos) EXPECT_EQ(s.process->Wait(), 0);
}

}  // namespace
}  // namespace granary::testing
