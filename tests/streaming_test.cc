// Server push (core/stream.h): streaming grain methods read in the silo
// (a hosted caller), through the C++ SDK over the gateway protocol, and
// through a stock gRPC stub of the grain's service. Every item arrives in
// order; a slow reader holds the grain back instead of growing memory; a
// cancel, a failure, a deactivation and a vanished client each end the
// stream as documented; a thousand subscribers share one grain.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "core/stream.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/silo_fixture.h"
#include "tests/test_grains.granary.h"
#include "tests/test_grains.grpc.pb.h"

namespace granary::testing {
namespace {

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;

CountRequest Count(int n, int pad = 0) {
  CountRequest r;
  r.set_n(n);
  r.set_pad(pad);
  return r;
}

// Reads `stream` to its end; the items' numbers.
std::vector<int> ReadAll(Stream<CountItem>& stream) {
  std::vector<int> got;
  CountItem item;
  while (stream.Read(&item)) got.push_back(item.i());
  return got;
}

std::vector<int> Iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

class StreamingTest : public SiloFixture {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartSilo()); }

  std::unique_ptr<Client> Connect() {
    ClientOptions options;
    options.gateways = {gateway_->address()};
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
    EXPECT_THAT(client.status(), IsOk());
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Stats of grain `key` ("written=N subscribers=M"), as numbers.
  static std::pair<int64_t, int64_t> Stats(StreamerRef grain) {
    absl::StatusOr<Text> t = grain.Stats({}).Get();
    EXPECT_THAT(t, IsOk());
    if (!t.ok()) return {-1, -1};
    std::vector<std::string> parts = absl::StrSplit(t->text(), ' ');
    int64_t written = -1;
    int64_t subscribers = -1;
    EXPECT_TRUE(
        absl::SimpleAtoi(absl::StripPrefix(parts[0], "written="), &written));
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripPrefix(parts[1], "subscribers="),
                                 &subscribers));
    return {written, subscribers};
  }

  // Waits until `key`'s grain holds `n` subscribers.
  static bool WaitSubscribers(StreamerRef grain, int64_t n) {
    for (int i = 0; i < 3000; ++i) {
      if (Stats(grain).second == n) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }
};

TEST_F(StreamingTest, AHostedReaderGetsEveryItemInOrder) {
  Stream<CountItem> stream =
      silo_->Get<StreamerRef>("hosted").Count(Count(2000));
  EXPECT_EQ(ReadAll(stream), Iota(2000));
  EXPECT_THAT(stream.status(), IsOk());
  ASSERT_TRUE(state_.WaitForLog("hosted:count-done OK"));
}

TEST_F(StreamingTest, ACoroutineReadsWithReadAsync) {
  StreamerRef grain = silo_->Get<StreamerRef>("async");
  auto read = [](StreamerRef g) -> Task<std::vector<int>> {
    Stream<CountItem> stream = g.Count(Count(500));
    std::vector<int> got;
    CountItem item;
    while (true) {
      bool more = co_await stream.ReadAsync(&item);
      if (!more) break;
      got.push_back(item.i());
    }
    if (!stream.status().ok()) throw StatusError(stream.status());
    co_return got;
  };
  absl::StatusOr<std::vector<int>> got = read(grain).Get();
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(*got, Iota(500));
}

TEST_F(StreamingTest, AFailingMethodEndsItsStreamWithItsError) {
  Stream<CountItem> stream =
      silo_->Get<StreamerRef>("fails").CountThenFail(Count(3));
  EXPECT_EQ(ReadAll(stream), Iota(3));
  EXPECT_THAT(stream.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(StreamingTest, ASlowHostedReaderHoldsTheGrainBack) {
  StreamerRef grain = silo_->Get<StreamerRef>("slow");
  Stream<CountItem> stream = grain.Count(Count(5000, 100));
  absl::SleepFor(absl::Milliseconds(300));
  // The grain waits for room: no more than one buffer was written.
  EXPECT_LE(Stats(grain).first, kDefaultStreamWindow);
  EXPECT_EQ(ReadAll(stream), Iota(5000));
  EXPECT_THAT(stream.status(), IsOk());
}

TEST_F(StreamingTest, CancellingEndsTheStreamAndTheGrainsWrites) {
  StreamerRef grain = silo_->Get<StreamerRef>("cancel");
  Stream<CountItem> stream = grain.Count(Count(1 << 30));
  CountItem item;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(stream.Read(&item));
    EXPECT_EQ(item.i(), i);
  }
  stream.Cancel();
  while (stream.Read(&item)) {
  }
  EXPECT_THAT(stream.status(), StatusIs(absl::StatusCode::kCancelled));
  ASSERT_TRUE(state_.WaitForLog("cancel:count-done CANCELLED"));
}

TEST_F(StreamingTest, DeactivationEndsStreamsUnavailableAndResubscribingWorks) {
  StreamerRef grain = silo_->Get<StreamerRef>("deact");
  Stream<CountItem> first = grain.Subscribe({});
  ASSERT_TRUE(WaitSubscribers(grain, 1));
  ASSERT_THAT(grain.Publish(Count(7)).Get(), IsOk());
  ASSERT_THAT(grain.Deactivate({}).Get(), IsOk());
  CountItem item;
  ASSERT_TRUE(first.Read(&item));
  EXPECT_EQ(item.i(), 7);
  EXPECT_FALSE(first.Read(&item));
  EXPECT_THAT(first.status(), StatusIs(absl::StatusCode::kUnavailable));
  // A new activation takes the new subscription.
  Stream<CountItem> second = grain.Subscribe({});
  ASSERT_TRUE(WaitSubscribers(grain, 1));
  absl::StatusOr<Text> took = grain.Publish(Count(8)).Get();
  ASSERT_THAT(took, IsOk());
  EXPECT_EQ(took->text(), "1");
  ASSERT_TRUE(second.Read(&item));
  EXPECT_EQ(item.i(), 8);
}

TEST_F(StreamingTest, AnObserverSetDropsTheSlowAndTheGone) {
  StreamerRef grain = silo_->Get<StreamerRef>("observers");
  Stream<CountItem> reader = grain.Subscribe({});
  Stream<CountItem> sleeper = grain.Subscribe({});
  auto gone = std::make_unique<Stream<CountItem>>(grain.Subscribe({}));
  ASSERT_TRUE(WaitSubscribers(grain, 3));
  gone.reset();  // cancels its stream
  ASSERT_TRUE(WaitSubscribers(grain, 2));
  CountItem item;
  const int n = static_cast<int>(kDefaultStreamWindow) + 1;
  for (int i = 0; i < n; ++i) {
    ASSERT_THAT(grain.Publish(Count(i)).Get(), IsOk());
    ASSERT_TRUE(reader.Read(&item));
    EXPECT_EQ(item.i(), i);
  }
  // The sleeper fell a whole buffer behind: it reads what it had, then
  // RESOURCE_EXHAUSTED; the reader goes on.
  EXPECT_EQ(ReadAll(sleeper), Iota(n - 1));
  EXPECT_THAT(sleeper.status(), StatusIs(absl::StatusCode::kResourceExhausted));
  absl::StatusOr<Text> took = grain.Publish(Count(n)).Get();
  ASSERT_THAT(took, IsOk());
  EXPECT_EQ(took->text(), "1");
  ASSERT_TRUE(reader.Read(&item));
  EXPECT_EQ(item.i(), n);
}

TEST_F(StreamingTest, TheSdkReadsEveryItemInOrder) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  StreamerRef grain = client->Get<StreamerRef>("sdk");
  Stream<CountItem> stream = grain.Count(Count(5000, 64));
  EXPECT_EQ(ReadAll(stream), Iota(5000));
  EXPECT_THAT(stream.status(), IsOk());
  Stream<CountItem> failing = grain.CountThenFail(Count(2));
  EXPECT_EQ(ReadAll(failing), Iota(2));
  EXPECT_THAT(failing.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(client->in_flight(), 0);
}

TEST_F(StreamingTest, ASlowSdkReaderHoldsTheGrainBackAcrossTheNetwork) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  StreamerRef grain = client->Get<StreamerRef>("sdk-slow");
  Stream<CountItem> stream = grain.Count(Count(20000, 1024));
  absl::SleepFor(absl::Milliseconds(500));
  // Items in flight are bounded by the buffers on the way (the client's,
  // the gateway's credit and the grain's), not by what the grain would
  // write: 20 MB.
  const int64_t written = Stats(silo_->Get<StreamerRef>("sdk-slow")).first;
  EXPECT_GT(written, 0);
  EXPECT_LE(written, 4 * kDefaultStreamWindow);
  EXPECT_LT(silo_->internals().remote_memory().used(), int64_t{1} << 20);
  EXPECT_EQ(ReadAll(stream), Iota(20000));
  EXPECT_THAT(stream.status(), IsOk());
}

// The grain ends its stream while the SDK reader has read nothing: what the
// reader has no credit for yet waits in the silo, and the end comes after
// the last item, not before it (nor as an overrun of the reader's buffer).
TEST_F(StreamingTest, AStreamThatEndsAheadOfItsSdkReaderLosesNothing) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  const int n = kDefaultStreamWindow + 36;  // more than the reader's credit
  Stream<CountItem> stream =
      client->Get<StreamerRef>("sdk-behind").Count(Count(n));
  ASSERT_TRUE(state_.WaitForLog("sdk-behind:count-done OK"));
  absl::SleepFor(absl::Milliseconds(100));  // the end reaches the gateway
  EXPECT_EQ(ReadAll(stream), Iota(n));
  EXPECT_THAT(stream.status(), IsOk());
}

// A stream that fails while its reader is behind: the reader gets a prefix
// of the items (what its credit allowed), then the error, without the
// silo waiting on a reader that may never read again.
TEST_F(StreamingTest, AStreamThatFailsAheadOfItsSdkReaderEndsWithItsError) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  const int n = kDefaultStreamWindow + 36;
  Stream<CountItem> stream =
      client->Get<StreamerRef>("sdk-behind-fails").CountThenFail(Count(n));
  absl::SleepFor(absl::Milliseconds(300));  // the grain runs ahead
  const std::vector<int> got = ReadAll(stream);
  EXPECT_THAT(stream.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_LE(got.size(), static_cast<size_t>(n));
  // At least the items its credit let through before the failure: they
  // were sent while the grain ran ahead, and an error never overtakes them.
  EXPECT_GE(got.size(), static_cast<size_t>(kDefaultStreamWindow));
  EXPECT_EQ(got, Iota(static_cast<int>(got.size())));
}

// What an SDK stream holds in the silo (its request, its unsent items) is
// given back when it ends, however it ends.
TEST_F(StreamingTest, EndedSdkStreamsGiveTheirMemoryBack) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  for (int round = 0; round < 10; ++round) {
    std::vector<Stream<CountItem>> streams;
    for (int i = 0; i < 100; ++i) {
      streams.push_back(client->Get<StreamerRef>(absl::StrCat("mem-", i))
                            .Count(Count(i % 2 == 0 ? 3 : 1 << 30)));
    }
    for (int i = 0; i < 100; i += 2) {
      EXPECT_EQ(ReadAll(streams[i]), Iota(3));
      EXPECT_THAT(streams[i].status(), IsOk());
    }
    streams.clear();  // the endless ones are cancelled
  }
  for (int i = 0; silo_->internals().remote_memory().used() != 0 && i < 500;
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(silo_->internals().remote_memory().used(), 0);
}

TEST_F(StreamingTest, AnSdkCancelReachesTheGrain) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  Stream<CountItem> stream =
      client->Get<StreamerRef>("sdk-cancel").Count(Count(1 << 30));
  CountItem item;
  ASSERT_TRUE(stream.Read(&item));
  stream.Cancel();
  while (stream.Read(&item)) {
  }
  EXPECT_THAT(stream.status(), StatusIs(absl::StatusCode::kCancelled));
  ASSERT_TRUE(state_.WaitForLog("sdk-cancel:count-done CANCELLED"));
}

TEST_F(StreamingTest, AClientThatGoesAwayIsDroppedFromTheObserverSet) {
  StreamerRef grain = silo_->Get<StreamerRef>("leaver");
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  Stream<CountItem> stream = client->Get<StreamerRef>("leaver").Subscribe({});
  ASSERT_TRUE(WaitSubscribers(grain, 1));
  client->Close(absl::ZeroDuration());
  // Its gateway stream broke: the subscription is cancelled.
  EXPECT_TRUE(WaitSubscribers(grain, 0));
}

TEST_F(StreamingTest, AThousandSubscribersToOneGrain) {
  std::unique_ptr<Client> client = Connect();
  ASSERT_NE(client, nullptr);
  StreamerRef grain = client->Get<StreamerRef>("crowd");
  constexpr int kSubscribers = 1000;
  constexpr int kMessages = 20;
  std::vector<Stream<CountItem>> streams;
  for (int i = 0; i < kSubscribers; ++i) streams.push_back(grain.Subscribe({}));
  ASSERT_TRUE(WaitSubscribers(grain, kSubscribers));
  for (int m = 0; m < kMessages; ++m) {
    absl::StatusOr<Text> took = grain.Publish(Count(m)).Get();
    ASSERT_THAT(took, IsOk());
    EXPECT_EQ(took->text(), absl::StrCat(kSubscribers));
  }
  CountItem item;
  for (Stream<CountItem>& s : streams) {
    for (int m = 0; m < kMessages; ++m) {
      ASSERT_TRUE(s.Read(&item));
      ASSERT_EQ(item.i(), m);
    }
  }
  streams.clear();  // every stream cancelled
  EXPECT_TRUE(WaitSubscribers(grain, 0));
}

TEST_F(StreamingTest, AStockGrpcStubReadsTheStream) {
  auto channel = grpc::CreateChannel(gateway_->address(),
                                     grpc::InsecureChannelCredentials());
  auto stub = Streamer::NewStub(channel);
  {
    grpc::ClientContext context;
    context.AddMetadata("granary-key", "grpc");
    std::unique_ptr<grpc::ClientReader<CountItem>> reader =
        stub->Count(&context, Count(3000, 32));
    std::vector<int> got;
    CountItem item;
    while (reader->Read(&item)) got.push_back(item.i());
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_EQ(got, Iota(3000));
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("granary-key", "grpc");
    std::unique_ptr<grpc::ClientReader<CountItem>> reader =
        stub->CountThenFail(&context, Count(1));
    CountItem item;
    ASSERT_TRUE(reader->Read(&item));
    EXPECT_FALSE(reader->Read(&item));
    EXPECT_EQ(reader->Finish().error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    // A client's cancel reaches the grain.
    grpc::ClientContext context;
    context.AddMetadata("granary-key", "grpc-cancel");
    std::unique_ptr<grpc::ClientReader<CountItem>> reader =
        stub->Count(&context, Count(1 << 30));
    CountItem item;
    ASSERT_TRUE(reader->Read(&item));
    context.TryCancel();
    while (reader->Read(&item)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
    ASSERT_TRUE(state_.WaitForLog("grpc-cancel:count-done CANCELLED"));
  }
  {
    // Bad input is refused before any grain sees it.
    grpc::ClientContext context;
    context.AddMetadata("granary-key", "");
    std::unique_ptr<grpc::ClientReader<CountItem>> reader =
        stub->Count(&context, Count(1));
    CountItem item;
    EXPECT_FALSE(reader->Read(&item));
    EXPECT_EQ(reader->Finish().error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
}

}  // namespace
}  // namespace granary::testing
