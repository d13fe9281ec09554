// The handler at the top of every thread: the body runs as is; an exception
// that escapes it ends the process with code 70 and says which thread and
// which exception.
#include "core/thread_top.h"

#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"

namespace granary {
namespace {

TEST(ThreadTopTest, RunsTheBody) {
  int runs = 0;
  std::thread t([&runs] { RunThreadTop("worker", [&runs] { ++runs; }); });
  t.join();
  EXPECT_EQ(runs, 1);
}

class ThreadTopDeathTest : public testing::Test {
 protected:
  ThreadTopDeathTest() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(ThreadTopDeathTest, AnExceptionEndsTheProcessNamingThreadAndException) {
  EXPECT_EXIT(
      {
        std::thread t([] {
          RunThreadTop("storage_writer",
                       [] { throw std::runtime_error("disk on fire"); });
        });
        t.join();
      },
      testing::ExitedWithCode(kThreadTopExitCode),
      "thread=storage_writer exception=std::runtime_error "
      "what=\"disk on fire\"");
}

TEST_F(ThreadTopDeathTest, AnythingThrownEndsTheProcess) {
  EXPECT_EXIT(
      {
        std::thread t([] { RunThreadTop("scheduler_0", [] { throw 42; }); });
        t.join();
      },
      testing::ExitedWithCode(kThreadTopExitCode),
      "granary: thread scheduler_0 ended by an uncaught exception int");
}

}  // namespace
}  // namespace granary
