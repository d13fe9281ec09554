// File: rpc/async_unary.h
// -----------------------------------------------------------------------------
// One unary gRPC call through a stub's callback API, for the silo's clients
// of other silos (directory, grain state):
//
//   StartUnary<v1::StateKey, v1::StoredState>(
//       key, absl::Seconds(10), /*wait_for_ready=*/true,
//       /*keep_alive=*/nullptr,
//       [&](grpc::ClientContext* c, const v1::StateKey* q, v1::StoredState* r,
//           std::function<void(grpc::Status)> on_done) {
//         stub->async()->Read(c, q, r, std::move(on_done));
//       },
//       [](absl::StatusOr<v1::StoredState> reply) { ... });
//
// `start` issues the call (synchronously, before StartUnary returns);
// `done` gets the reply or the error, once, on a gRPC thread. The call's
// state stays on the heap until gRPC completes it, together with
// `keep_alive` (e.g. the stub). An atomic released before the call starts
// and acquired in its completion orders the hand-off for ThreadSanitizer,
// which does not see inside gRPC.
//
// AwaitUnary is the same call as a lazy Task, for coroutines: the awaiting
// coroutine resumes on the gRPC thread that completes the call
// (core/completion.h), so what follows the `co_await` must not block.
//
//   absl::StatusOr<v1::StoredState> reply =
//       co_await AwaitUnary<v1::StateKey, v1::StoredState>(
//           key, absl::Seconds(10), /*wait_for_ready=*/true, start);
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/completion.h"
#include "core/task.h"
#include "grpcpp/client_context.h"
#include "rpc/status.h"

namespace granary::rpc {

template <typename Request, typename Reply, typename Start>
void StartUnary(Request request, absl::Duration timeout, bool wait_for_ready,
                std::shared_ptr<void> keep_alive, Start start,
                std::function<void(absl::StatusOr<Reply>)> done) {
  struct Call {
    std::shared_ptr<void> keep_alive;
    grpc::ClientContext context;
    Request request;
    Reply reply;
    std::function<void(absl::StatusOr<Reply>)> done;
    std::atomic<bool> started{false};
  };
  auto* c = new Call;
  c->keep_alive = std::move(keep_alive);
  c->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  c->context.set_wait_for_ready(wait_for_ready);
  c->request = std::move(request);
  c->done = std::move(done);
  c->started.store(true, std::memory_order_release);
  start(&c->context, &c->request, &c->reply, [c](grpc::Status s) {
    (void)c->started.load(std::memory_order_acquire);
    std::unique_ptr<Call> owned(c);
    if (s.ok()) {
      owned->done(std::move(owned->reply));
    } else {
      owned->done(FromGrpc(s));
    }
  });
}

template <typename Request, typename Reply, typename Start>
Task<absl::StatusOr<Reply>> AwaitUnary(Request request, absl::Duration timeout,
                                       bool wait_for_ready, Start start) {
  Completion<absl::StatusOr<Reply>> done;
  StartUnary<Request, Reply>(std::move(request), timeout, wait_for_ready,
                             /*keep_alive=*/nullptr, std::move(start),
                             [&done](absl::StatusOr<Reply> reply) {
                               done.Complete(std::move(reply));
                             });
  co_return co_await done;
}

}  // namespace granary::rpc
