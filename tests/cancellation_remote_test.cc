// Cancellation from outside a silo (core/cancel.h): the C++ SDK's cancel
// reaches the grain through the gateway protocol (RequestBatch.cancels), a
// stock gRPC client's cancellation reaches it through the grain's gRPC
// service, a cancel (or deadline) follows a call chain to another silo, and
// 100,000 cancelled calls leave nothing behind.
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "core/cancel.h"
#include "core/detach.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "silo/silo_host.h"
#include "tests/cancellation_fixture.h"
#include "tests/dev_host_options.h"
#include "tests/test_grains.grpc.pb.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;
using ::testing::Contains;
using ::testing::Not;

class CancellationRemoteTest : public CancellationFixture {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartSilo()); }
};

TEST_F(CancellationRemoteTest, TheSdkCancelsThroughTheGateway) {
  ClientOptions options;
  options.gateways = {gateway_->address()};
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_THAT(client.status(), IsOk());
  CancellableRef grain = (*client)->Get<CancellableRef>("sdk");
  CancellationSource hold;
  Pending busy([&] {
    return grain.Wait(MakeText(""), CancelledBy(hold)).Get().status();
  });
  ASSERT_TRUE(state_.WaitForLog("sdk:wait"));
  CancellationSource source;
  Pending queued([&] {
    return grain.Record(MakeText("late"), CancelledBy(source)).Get().status();
  });
  ASSERT_NO_FATAL_FAILURE(WaitQueued("sdk", 1));
  source.Cancel();
  EXPECT_THAT(queued.Wait(), StatusIs(absl::StatusCode::kCancelled));
  hold.Cancel();
  EXPECT_THAT(busy.Wait(), StatusIs(absl::StatusCode::kCancelled));
  // The running turn saw the cancel the client sent.
  ASSERT_TRUE(state_.WaitForLog("sdk:saw-cancel"));
  ASSERT_THAT(grain.Record(MakeText("after")).Get(), IsOk());
  EXPECT_THAT(state_.Log(), Not(Contains("sdk:ran late")));
  (*client)->Close();
}

TEST_F(CancellationRemoteTest, AGrpcClientsCancellationReachesTheGrain) {
  auto channel = grpc::CreateChannel(gateway_->address(),
                                     grpc::InsecureChannelCredentials());
  auto stub = Cancellable::NewStub(channel);
  grpc::ClientContext context;
  context.AddMetadata("granary-key", "grpc");
  Text request;
  Text reply;
  Notification done;
  grpc::Status status;
  stub->async()->Wait(&context, &request, &reply, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(state_.WaitForLog("grpc:wait"));
  context.TryCancel();
  done.WaitForNotification();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(state_.WaitForLog("grpc:saw-cancel"));

  // A bad key is still refused before any call starts.
  grpc::ClientContext bad;
  bad.AddMetadata("granary-key", "");
  EXPECT_EQ(stub->Record(&bad, MakeText("x"), &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// Bytes malloc has handed out and not had back.
size_t HeapInUse() { return mallinfo2().uordblks; }

TEST_F(CancellationRemoteTest,
       AHundredThousandCancelledCallsLeaveNothingBehind) {
  ClientOptions options;
  options.gateways = {gateway_->address()};
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_THAT(client.status(), IsOk());
  CancellableRef grain = (*client)->Get<CancellableRef>("leak");
  constexpr int kRounds = 101;  // the first warms up
  constexpr int kCalls = 1000;
  size_t before = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (round == 1) before = HeapInUse();
    // The grain is busy: every call queues behind Wait.
    CancellationSource hold;
    Pending busy([&] {
      return grain.Wait(MakeText(""), CancelledBy(hold)).Get().status();
    });
    ASSERT_TRUE(state_.WaitUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return std::count(state_.log.begin(), state_.log.end(), "leak:wait") ==
             round + 1;
    }));
    std::vector<std::unique_ptr<CancellationSource>> sources;
    std::atomic<int> cancelled{0};
    std::atomic<int> answered{0};
    for (int i = 0; i < kCalls; ++i) {
      sources.push_back(std::make_unique<CancellationSource>());
      Detach(grain.Record(MakeText("late"), CancelledBy(*sources.back())),
             [&](absl::StatusOr<Text> r) {
               if (r.status().code() == absl::StatusCode::kCancelled) {
                 cancelled.fetch_add(1);
               }
               answered.fetch_add(1);
             });
    }
    for (auto& s : sources) s->Cancel();
    for (int i = 0; answered.load() != kCalls && i < 6000; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_EQ(answered.load(), kCalls);
    EXPECT_EQ(cancelled.load(), kCalls);
    hold.Cancel();
    ASSERT_THAT(busy.Wait(), StatusIs(absl::StatusCode::kCancelled));
    // The gateway answers every cancel; nothing stays in flight.
    for (int i = 0; (*client)->in_flight() != 0 && i < 6000; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_EQ((*client)->in_flight(), 0);
  }
  // The dropped calls are gone from the grain's mailbox and the budget.
  ASSERT_THAT(grain.Record(MakeText("after")).Get(), IsOk());
  EXPECT_EQ(QueuedAt("leak"), 0);
  // The last reply's bytes go back when the gateway's write of it
  // completes, which may be after the client read it.
  for (int i = 0; silo_->internals().remote_memory().used() != 0 && i < 500;
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(silo_->internals().remote_memory().used(), 0);
  EXPECT_THAT(state_.Log(), Not(Contains("leak:ran late")));
  const size_t after = HeapInUse();
  // A leak of anything per call (a call alone is hundreds of bytes) would
  // show as tens of megabytes.
  EXPECT_LT(after, before + (size_t{8} << 20))
      << "heap in use grew from " << before << " to " << after;
  (*client)->Close();
}

// Two SiloHosts of a dev cluster in this process, over real gRPC: a grain on
// one awaits a grain on the other, and the client's cancel (or the
// deadline) reaches the second.
TEST(CancellationClusterTest, TheCancelReachesACallOnAnotherSilo) {
  TestState state;
  auto add = [&state](silo::Runtime& s) { return AddTestGrains(s, &state); };
  silo::SiloHost primary(DevHostOptions());
  primary.AddGrains(add);
  ASSERT_THAT(primary.Start(), IsOk());
  silo::SiloHost member(DevHostOptions(primary.silo_address()));
  member.AddGrains(add);
  ASSERT_THAT(member.Start(), IsOk());

  ClientOptions client_options;
  client_options.gateways = {primary.gateway_address()};
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(client_options);
  ASSERT_THAT(client.status(), IsOk());
  // Keys of grains on each silo.
  std::map<std::string, std::vector<std::string>> keys_on;
  for (int i = 0; i < 500; ++i) {
    const std::string key = absl::StrCat("k", i);
    absl::StatusOr<Text> where =
        (*client)->Get<CancellableRef>(key).Where({}).Get();
    ASSERT_THAT(where, IsOk());
    keys_on[where->text()].push_back(key);
    if (keys_on[primary.silo()->name()].size() >= 2 &&
        keys_on[member.silo()->name()].size() >= 2) {
      break;
    }
  }
  const std::vector<std::string> on_primary = keys_on[primary.silo()->name()];
  const std::vector<std::string> on_member = keys_on[member.silo()->name()];
  ASSERT_GE(on_primary.size(), 2u);
  ASSERT_GE(on_member.size(), 2u);

  // The client cancels: the grain on the primary is cancelled through the
  // gateway protocol, and the call it made to the member the same way.
  CancellationSource source;
  Pending forward([&] {
    return (*client)
        ->Get<CancellableRef>(on_primary[0])
        .Forward(MakeText(on_member[0]), CancelledBy(source))
        .Get()
        .status();
  });
  ASSERT_TRUE(state.WaitForLog(on_member[0] + ":wait"));
  source.Cancel();
  EXPECT_THAT(forward.Wait(), StatusIs(absl::StatusCode::kCancelled));
  ASSERT_TRUE(state.WaitForLog(on_member[0] + ":saw-cancel"));

  // The deadline of the client's call does the same.
  EXPECT_THAT((*client)
                  ->Get<CancellableRef>(on_primary[1])
                  .Forward(MakeText(on_member[1]), absl::Milliseconds(300))
                  .Get()
                  .status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_TRUE(state.WaitForLog(on_member[1] + ":saw-cancel"));
  (*client)->Close();
  member.Stop();
  primary.Stop();
}

}  // namespace
}  // namespace granary::testing
