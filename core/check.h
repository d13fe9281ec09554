// File: core/check.h
// -----------------------------------------------------------------------------
// GRANARY_CHECK: a condition that only a programming error can break (a
// metric registered twice, a histogram with unordered bounds). When it is
// false the process writes the condition, where it is and the message to
// stderr, and aborts. Granary does not throw: its code runs on coroutines and
// worker threads, where an exception would end the process anyway, only
// further from its cause.
//
//   GRANARY_CHECK(!bounds.empty()) << "histogram " << name << " needs bounds";
//
// Never for input from outside the process: that gets an absl::Status.
#pragma once

#include <sstream>

#include "absl/base/optimization.h"

namespace granary::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

}  // namespace granary::internal

#define GRANARY_CHECK(condition)    \
  if (ABSL_PREDICT_TRUE(condition)) \
    ;                               \
  else                              \
    ::granary::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()
