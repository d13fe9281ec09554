// File: tests/cancellation_fixture.h
// -----------------------------------------------------------------------------
// What the cancellation tests share (tests/cancellation_test.cc, in the silo;
// tests/cancellation_remote_test.cc, through the gateway, gRPC and a
// cluster): calls run on threads of their own, options that cancel with a
// source, and a look at how many calls wait in a Cancellable grain's mailbox.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/cancel.h"
#include "gtest/gtest.h"
#include "tests/silo_fixture.h"
#include "tests/test_grains.granary.h"

namespace granary::testing {

constexpr char kCancellable[] = "granary.testing.Cancellable";

// Runs a call on a thread of its own; Wait() gives its outcome.
class Pending {
 public:
  explicit Pending(std::function<absl::Status()> call)
      : thread_([this, call = std::move(call)] { status_ = call(); }) {}
  ~Pending() {
    if (thread_.joinable()) thread_.join();
  }
  absl::Status Wait() {
    thread_.join();
    return status_;
  }

 private:
  absl::Status status_;
  std::thread thread_;
};

// Options of a call that `source` cancels.
inline CallOptions CancelledBy(const CancellationSource& source,
                               absl::Duration timeout = kDefaultCallTimeout) {
  CallOptions options(timeout);
  options.cancel = source.token();
  return options;
}

class CancellationFixture : public SiloFixture {
 protected:
  CancellableRef Grain(const std::string& key) {
    return silo_->Get<CancellableRef>(key);
  }
  // Calls queued at the activation of `key` (-1: none).
  int QueuedAt(const std::string& key) {
    int n = -1;
    silo_->internals().catalog().Find(
        GrainId(kCancellable, key),
        [&n](silo::Activation* a) { n = a->Queued(); });
    return n;
  }
  void WaitQueued(const std::string& key, int n) {
    for (int i = 0; QueuedAt(key) != n && i < 6000; ++i) {
      absl::SleepFor(absl::Milliseconds(10));  // the caller is still sending
    }
    ASSERT_EQ(QueuedAt(key), n);
  }
};

}  // namespace granary::testing
