// File: tests/overload_fixture.h
// -----------------------------------------------------------------------------
// What the overload tests share (overload_test.cc, overload_io_test.cc): a
// stock granary-silo started per test, a well-behaved client calling it
// throughout (every call must succeed; its p50/p99 are printed), the silo's
// resident memory sampled to report its growth against a fixed bound, and
// small helpers for raw gateway calls and metrics.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "core/sync.h"
#include "examples/counter.granary.h"
#include "examples/counter.grpc.pb.h"
#include "gmock/gmock.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/process_util.h"

namespace granary::testing {

using ::granary::examples::AddRequest;
using ::granary::examples::CounterRef;
using ::testing::HasSubstr;
using ::testing::Not;

inline constexpr int64_t kMiB = int64_t{1} << 20;

// Samples a process's resident memory every 20 ms from construction on.
class RssWatch {
 public:
  explicit RssWatch(pid_t pid)
      : pid_(pid), baseline_(ResidentBytesOf(pid)), peak_(baseline_) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        peak_.store(std::max(peak_.load(), ResidentBytesOf(pid_)));
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }
  ~RssWatch() { Stop(); }
  // Stops sampling; the peak's growth over the first sample, in MiB.
  int64_t Stop() {
    if (thread_.joinable()) {
      stop_.store(true);
      thread_.join();
    }
    return (peak_.load() - baseline_) / kMiB;
  }
  int64_t baseline_mib() const { return baseline_ / kMiB; }

 private:
  const pid_t pid_;
  const int64_t baseline_;
  std::atomic<int64_t> peak_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One SDK client calling Counter.Add on 100 keys in turn, one call at a
// time, timing each.
class CalmCaller {
 public:
  explicit CalmCaller(const std::string& gateway) {
    ClientOptions options;
    options.gateways = {gateway};
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return;
    client_ = *std::move(client);
    thread_ = std::thread([this] {
      AddRequest one;
      one.set_amount(1);
      for (int i = 0; !stop_.load(); ++i) {
        const absl::Time start = absl::Now();
        auto reply = client_->Get<CounterRef>(absl::StrCat("calm-", i % 100))
                         .Add(one)
                         .Get();
        const int64_t us = absl::ToInt64Microseconds(absl::Now() - start);
        MutexLock lock(&mu_);
        if (reply.ok()) {
          latencies_us_.push_back(us);
        } else if (errors_++ == 0) {
          first_error_ = reply.status().ToString();
        }
      }
    });
  }
  ~CalmCaller() { Stop(); }

  // Stops calling, and checks that every call succeeded; prints the p99.
  void StopAndCheck(const std::string& test) {
    Stop();
    MutexLock lock(&mu_);
    EXPECT_EQ(errors_, 0) << "first error: " << first_error_;
    ASSERT_FALSE(latencies_us_.empty()) << "the calm client got no answer";
    std::sort(latencies_us_.begin(), latencies_us_.end());
    const int64_t p99 = latencies_us_[latencies_us_.size() * 99 / 100];
    std::cout << "[" << test
              << "] well-behaved client: " << latencies_us_.size()
              << " calls, 0 errors, p50 "
              << latencies_us_[latencies_us_.size() / 2] << " us, p99 " << p99
              << " us\n";
  }

 private:
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  std::unique_ptr<Client> client_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Mutex mu_;
  std::vector<int64_t> latencies_us_ ABSL_GUARDED_BY(mu_);
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

// A channel of its own (a connection no other channel shares).
inline std::shared_ptr<grpc::Channel> OwnChannel(const std::string& gateway) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(gateway, grpc::InsecureChannelCredentials(),
                                   args);
}

inline v1::Request CounterCall(const std::string& method, std::string key,
                               uint64_t id) {
  v1::Request r;
  r.set_id(id);
  r.set_method("/granary.examples.Counter/" + method);
  r.set_key(std::move(key));
  AddRequest one;
  one.set_amount(1);
  one.SerializeToString(r.mutable_payload());
  return r;
}

inline int64_t CounterValue(examples::Counter::Stub& stub,
                            const std::string& key) {
  grpc::ClientContext context;
  context.AddMetadata("granary-key", key);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  examples::GetRequest get;
  examples::CounterValue value;
  grpc::Status status = stub.Get(&context, get, &value);
  return status.ok() ? value.value() : -1;
}

inline void Report(const std::string& test, const RssWatch& rss, int64_t growth,
                   int64_t bound) {
  std::cout << "[" << test << "] silo RSS " << rss.baseline_mib()
            << " MiB before, grew " << growth << " MiB (bound " << bound
            << " MiB)\n";
}

class OverloadTest : public ::testing::Test {
 protected:
  // Starts a silo with `extra` flags and a well-behaved client.
  void Start(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = AnyPorts(TempDir(name));
    args.insert(args.end(), extra.begin(), extra.end());
    silo_ = std::make_unique<SiloProcess>(args);
    const std::string ready = silo_->ReadyLine();
    ASSERT_THAT(ready, HasSubstr("READY"));
    gateway_ = Field(ready, "gateway");
    http_ = Field(ready, "http");
    calm_ = std::make_unique<CalmCaller>(gateway_);
    absl::SleepFor(absl::Seconds(1));  // the silo's memory settles
  }

  void TearDown() override {
    calm_.reset();
    if (silo_ != nullptr) {
      silo_->Signal(SIGTERM);
      EXPECT_EQ(silo_->Wait(absl::Seconds(30)), 0) << silo_->Stderr();
    }
  }

  std::unique_ptr<SiloProcess> silo_;
  std::string gateway_;
  std::string http_;
  std::unique_ptr<CalmCaller> calm_;
};

}  // namespace granary::testing
