// The silo's metrics and overview served over HTTP while calls run on every
// worker: scrapes and the sampler read what the workers update (run under
// ThreadSanitizer), and the figures add up once the calls are done.
#include "silo/admin/admin_http.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/address.h"
#include "examples/counter_grain.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "silo/admin/http_server.h"
#include "silo/runtime/runtime.h"
#include "tests/process_util.h"
#include "tests/test_grains.h"

namespace granary::testing {
namespace {

using ::granary::examples::AddRequest;
using ::granary::examples::CounterRef;
using ::testing::HasSubstr;

TEST(AdminHttpTest, ScrapesDuringCallsAddUp) {
  silo::RuntimeOptions options;
  options.workers = 2;
  options.name = "admin-silo";
  silo::Runtime silo(options);
  TestState state;
  ASSERT_TRUE(AddTestGrains(silo, &state).ok());
  ASSERT_TRUE(silo.Start().ok());
  silo::AdminHttp admin(&silo, "127.0.0.1:1", absl::Milliseconds(20));
  silo::HttpServer http("127.0.0.1:0");
  admin.Register(&http);
  ASSERT_TRUE(http.Start().ok());
  ASSERT_TRUE(admin.Start().ok());

  constexpr int kCallers = 4, kCalls = 2000;
  std::atomic<bool> done{false};
  std::atomic<int> scrapes{0};
  std::vector<std::thread> scrapers;
  for (const char* path : {"/metrics", "/api/overview"}) {
    scrapers.emplace_back([&, path] {
      while (!done.load()) {
        std::string r = HttpGet(http.address(), path);
        if (r.rfind("HTTP/1.1 200", 0) == 0) scrapes.fetch_add(1);
      }
    });
  }
  std::vector<std::thread> callers;
  std::atomic<int> failed{0};
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      CounterRef counter = silo.Get<CounterRef>(absl::StrCat("c", t));
      AddRequest add;
      add.set_amount(1);
      for (int i = 0; i < kCalls; ++i) {
        if (!counter.Add(add).Get().ok()) failed.fetch_add(1);
      }
    });
  }
  for (auto& t : callers) t.join();
  done = true;
  for (auto& t : scrapers) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(scrapes.load(), 0);

  const std::string metrics = HttpGet(http.address(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr(absl::StrCat(
                           "granary_request_duration_seconds_count{type=\""
                           "granary.examples.Counter\",method=\"Add\"} ",
                           kCallers * kCalls, "\n")));
  EXPECT_THAT(metrics, HasSubstr("granary_activations{type=\"granary.examples."
                                 "Counter\"} 4\n"));
  EXPECT_THAT(metrics,
              HasSubstr(absl::StrCat("granary_messages_total{direction=\"in\","
                                     "kind=\"request\"} ",
                                     kCallers * kCalls, "\n")));
  const std::string overview = HttpGet(http.address(), "/api/overview");
  EXPECT_THAT(overview, HasSubstr("application/json"));
  EXPECT_THAT(overview, HasSubstr(absl::StrCat("\"method\":\"Add\"")));
  EXPECT_THAT(overview,
              HasSubstr(absl::StrCat("\"callsTotal\":", kCallers * kCalls)));
  EXPECT_THAT(HttpGet(http.address(), "/nope"), HasSubstr("404"));
  admin.Stop();
  http.Stop();
  silo.Stop();
}

// Against DNS rebinding: a Host header naming a host name other than
// localhost and the allowed ones is refused; addresses, localhost and no
// Host at all are served.
TEST(AdminHttpTest, OnlyAddressesLocalhostAndAllowedHostNamesAreServed) {
  silo::HttpServer http("127.0.0.1:0");
  http.AllowHosts({"Granary.Internal"});
  ASSERT_TRUE(http.Start().ok());
  const std::string port = http.address().substr(http.address().rfind(':') + 1);
  for (const std::string& host :
       std::vector<std::string>{"127.0.0.1:" + port, "localhost:" + port,
                                "LOCALHOST", "[::1]:" + port, "10.1.2.3",
                                "granary.internal:8080", "GRANARY.internal"}) {
    EXPECT_THAT(HttpGet(http.address(), "/healthz", "Host: " + host + "\r\n"),
                HasSubstr("200 OK"))
        << host;
  }
  EXPECT_THAT(HttpGet(http.address(), "/healthz"),
              HasSubstr("200 OK"));  // none
  for (const std::string& host : std::vector<std::string>{
           "evil.example", "evil.example:" + port, "localhost.evil.example",
           "127.0.0.1.evil.example", "[::1", "a:b:c", ""}) {
    const std::string r =
        HttpGet(http.address(), "/healthz", "Host: " + host + "\r\n");
    EXPECT_THAT(r, HasSubstr("403")) << host;
    EXPECT_THAT(r, HasSubstr("--http_hosts")) << host;
  }
  http.Stop();
}

TEST(AdminHttpTest, LoopbackHostsAreRecognized) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("[::1]"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("::"));
  EXPECT_FALSE(IsLoopbackHost("example.com"));
  EXPECT_FALSE(IsLoopbackHost(""));
}

}  // namespace
}  // namespace granary::testing
