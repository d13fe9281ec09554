// File: rpc/callback_queue.h
// -----------------------------------------------------------------------------
// gRPC (1.51 as packaged) serves the callback API of every channel and server
// from one process-wide completion queue, reference-counted by the channels
// that have used it: when the last of them goes, the queue is torn down, and
// a channel or server starting at that moment races the teardown (a
// double-unref of the queue: "assertion failed: prior > 0" or a double free).
// Processes that start and stop connections or servers over their life (a
// client reconnecting, a silo whose peers come and go, tests) hit it.
// HoldGrpcCallbackQueue() makes one channel, used once and never destroyed,
// so the queue lives until the process exits. Call it before the first
// callback-API channel or server; it is idempotent and thread-safe.
#pragma once

namespace granary::rpc {

void HoldGrpcCallbackQueue();

}  // namespace granary::rpc
