#include "rpc/callback_queue.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace granary::rpc {

namespace {
// Never destroyed (and reachable, so leak checkers see no leak): this
// channel's reference keeps the queue alive.
std::shared_ptr<grpc::Channel>* held_channel = nullptr;
}  // namespace

void HoldGrpcCallbackQueue() {
  static const bool held = [] {
    held_channel = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel("unix:/nonexistent/granary-callback-queue",
                            grpc::InsecureChannelCredentials()));
    grpc::GenericStub stub(*held_channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now());  // fails at once
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1), response;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    // A callback-API call is what makes the channel take its reference.
    stub.UnaryCall(&context, "/granary.Hold/Queue", grpc::StubOptions(),
                   &request, &response, [&](grpc::Status) {
                     std::lock_guard<std::mutex> lock(mu);
                     done = true;
                     cv.notify_all();
                   });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return true;
  }();
  (void)held;
}

}  // namespace granary::rpc
