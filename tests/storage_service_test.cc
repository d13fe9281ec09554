// The grain state a dev cluster's primary serves
// (silo/cluster/storage_service.h): through RemoteGrainStorage it behaves like
// the store it serves (etags, ABORTED on a stale one), and bad requests are
// refused with INVALID_ARGUMENT without touching it.
#include "silo/cluster/storage_service.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/testing/run_task.h"
#include "core/testing/status_matchers.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/callback_queue.h"
#include "storage/memory_storage.h"

using ::granary::matchers::IsOk;
using ::granary::matchers::StatusIs;

namespace granary::silo {
namespace {

constexpr absl::string_view kType = "test.Stored";

class StorageServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rpc::HoldGrpcCallbackQueue();  // see rpc/callback_queue.h
    service_ = std::make_unique<StorageService>(&store_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    address_ = absl::StrCat("127.0.0.1:", port);
    remote_ = std::make_unique<RemoteGrainStorage>(address_);
    stub_ = v1::GrainState::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now()));
    server_->Wait();
  }

  absl::StatusOr<storage::StoredState> Read(const GrainId& id) {
    return RunTask(remote_->Read(id));
  }
  absl::StatusOr<std::string> Write(const GrainId& id, std::string bytes,
                                    std::string etag) {
    return RunTask(remote_->Write(id, std::move(bytes), std::move(etag)));
  }
  absl::Status Clear(const GrainId& id, std::string etag) {
    return RunTask(remote_->Clear(id, std::move(etag))).status();
  }
  grpc::StatusCode RawWrite(const std::string& type, const std::string& key) {
    grpc::ClientContext context;
    v1::WriteStateRequest request;
    request.mutable_grain()->set_type(type);
    request.mutable_grain()->set_key(key);
    request.set_bytes("x");
    v1::WriteStateReply reply;
    return stub_->Write(&context, request, &reply).error_code();
  }

  storage::MemoryStorage store_;
  std::unique_ptr<StorageService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<RemoteGrainStorage> remote_;
  std::unique_ptr<v1::GrainState::Stub> stub_;
};

TEST_F(StorageServiceTest, NothingIsServedBeforeTheTypesAreKnown) {
  const GrainId id(InternTypeName(kType), "early");
  EXPECT_THAT(Read(id), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(RawWrite(std::string(kType), "early"),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(StorageServiceTest, ReadsWritesAndClearsWithEtagsLikeTheStoreItServes) {
  service_->AllowTypes({std::string(kType)});
  const GrainId id(InternTypeName(kType), "alice");
  absl::StatusOr<storage::StoredState> empty = Read(id);
  ASSERT_THAT(empty, IsOk());
  EXPECT_FALSE(empty->exists);
  absl::StatusOr<std::string> first = Write(id, "one", "");
  ASSERT_THAT(first, IsOk());
  absl::StatusOr<std::string> second = Write(id, "two", *first);
  ASSERT_THAT(second, IsOk());
  // A writer that read before the second write is refused and changes
  // nothing.
  EXPECT_THAT(Write(id, "stale", *first), StatusIs(absl::StatusCode::kAborted));
  absl::StatusOr<storage::StoredState> now = Read(id);
  ASSERT_THAT(now, IsOk());
  EXPECT_TRUE(now->exists);
  EXPECT_EQ(now->bytes, "two");
  EXPECT_EQ(now->etag, *second);
  EXPECT_THAT(Clear(id, *first), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(Clear(id, *second), IsOk());
  now = Read(id);
  ASSERT_THAT(now, IsOk());
  EXPECT_FALSE(now->exists);
}

TEST_F(StorageServiceTest, BadRequestsAreInvalidArgumentAndStoreNothing) {
  service_->AllowTypes({std::string(kType)});
  EXPECT_EQ(RawWrite("some.Other", "k"), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawWrite("", "k"), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawWrite(std::string(100000, 't'), "k"),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawWrite(std::string(kType), ""),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawWrite(std::string(kType), std::string(5000, 'k')),
            grpc::StatusCode::INVALID_ARGUMENT);
  // The good one still works, and only it was stored.
  EXPECT_EQ(RawWrite(std::string(kType), "k"), grpc::StatusCode::OK);
  absl::StatusOr<storage::StoredState> k =
      Read(GrainId(InternTypeName(kType), "k"));
  ASSERT_THAT(k, IsOk());
  EXPECT_TRUE(k->exists);
}

}  // namespace
}  // namespace granary::silo
