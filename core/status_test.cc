#include "core/status.h"

#include <stdexcept>

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

using ::granary::matchers::StatusIs;

namespace granary {
namespace {

absl::StatusOr<int> Half(int v) {
  if (v % 2 != 0) return absl::InvalidArgumentError("odd");
  return v / 2;
}

absl::Status Check(int v) {
  if (v < 0) return absl::OutOfRangeError("negative");
  return absl::OkStatus();
}

absl::StatusOr<int> Quarter(int v) {
  GRANARY_RETURN_IF_ERROR(Check(v));
  GRANARY_ASSIGN_OR_RETURN(int h, Half(v));
  GRANARY_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, MacrosPropagateErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_THAT(Quarter(-4), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(StatusTest, ExceptionsMapToStatuses) {
  auto from = [](auto thrower) {
    try {
      thrower();
    } catch (...) {
      return StatusFromException(std::current_exception());
    }
    return absl::OkStatus();
  };
  absl::Status s = from([] { throw StatusError(absl::AbortedError("etag")); });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kAborted));
  s = from([] { throw std::logic_error("bad"); });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(s.message(), "bad");
  s = from([] { throw 42; });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal));
  s = from([] { throw StatusError(absl::OkStatus()); });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal));
}

}  // namespace
}  // namespace granary
