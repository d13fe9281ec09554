// File: testing/wait.h
// -----------------------------------------------------------------------------
// WaitUntil: for a test that waits on work other threads do.
//
//   ASSERT_TRUE(WaitUntil([&] { return silo.ActivationCount() == 0; }));
#pragma once

#include <functional>

#include "absl/time/time.h"

namespace granary::testing {

// Waits until `pred()` holds, re-checking as other threads make progress;
// false after `limit` of real time, which only a broken runtime reaches.
bool WaitUntil(const std::function<bool()>& pred,
               absl::Duration limit = absl::Seconds(30));

}  // namespace granary::testing
