// File: core/testing/status_matchers.h
// -----------------------------------------------------------------------------
// GoogleMock matchers for statuses, for tests: they print the whole status
// on a mismatch, where a bare `.code()` comparison prints a number.
//
//   EXPECT_THAT(storage.Write(...), StatusIs(absl::StatusCode::kAborted));
//   EXPECT_THAT(reply, StatusIs(absl::StatusCode::kInvalidArgument,
//                               HasSubstr("grain key")));
//   EXPECT_THAT(counter.Add(req).Get(), IsOk());
//   EXPECT_THAT(grpc_status, StatusIs(grpc::StatusCode::UNAVAILABLE));
//
// They take absl::Status, absl::StatusOr<T>, anything with
// error_code()/error_message() (grpc::Status) or code()/message() (a
// granary.v1.Reply), and a code of either kind (both use the canonical
// google.rpc codes).
#pragma once

#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace granary::matchers {
namespace internal {

inline int CodeOf(const absl::Status& s) { return static_cast<int>(s.code()); }
inline std::string MessageOf(const absl::Status& s) {
  return std::string(s.message());
}
template <typename T>
int CodeOf(const absl::StatusOr<T>& s) {
  return CodeOf(s.status());
}
template <typename T>
std::string MessageOf(const absl::StatusOr<T>& s) {
  return MessageOf(s.status());
}
// grpc::Status, without this header depending on gRPC.
template <typename T>
requires requires(const T& t) {
  t.error_code();
  t.error_message();
}
int CodeOf(const T& s) { return static_cast<int>(s.error_code()); }
template <typename T>
requires requires(const T& t) {
  t.error_code();
  t.error_message();
}
std::string MessageOf(const T& s) { return s.error_message(); }

// A reply message carrying a status (granary.v1.Reply: code, message).
template <typename T>
requires requires(const T& t) {
  t.code();
  t.message();
}
int CodeOf(const T& s) { return static_cast<int>(s.code()); }
template <typename T>
requires requires(const T& t) {
  t.code();
  t.message();
}
std::string MessageOf(const T& s) { return std::string(s.message()); }

inline std::string CodeName(int code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

template <typename MessageMatcher>
class StatusIsMatcher {
 public:
  using is_gtest_matcher = void;
  StatusIsMatcher(int code, MessageMatcher message)
      : code_(code), message_(std::move(message)) {}

  template <typename S>
  bool MatchAndExplain(const S& s, ::testing::MatchResultListener* os) const {
    const int code = CodeOf(s);
    const std::string message = MessageOf(s);
    *os << "which is " << CodeName(code) << ": " << message;
    if (code != code_) return false;
    return ::testing::SafeMatcherCast<const std::string&>(message_)
        .MatchAndExplain(message, os);
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has status " << CodeName(code_) << " and a message that ";
    ::testing::SafeMatcherCast<const std::string&>(message_).DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have status " << CodeName(code_)
        << " with a message that ";
    ::testing::SafeMatcherCast<const std::string&>(message_).DescribeTo(os);
  }

 private:
  int code_;
  MessageMatcher message_;
};

}  // namespace internal

// The status (or the status of a StatusOr) has `code` and, optionally, a
// message matching `message`.
template <typename Code, typename MessageMatcher>
requires std::is_enum_v<Code>
auto StatusIs(Code code, MessageMatcher message) {
  return internal::StatusIsMatcher<MessageMatcher>(static_cast<int>(code),
                                                   std::move(message));
}
template <typename Code>
requires std::is_enum_v<Code>
auto StatusIs(Code code) { return StatusIs(code, ::testing::_); }

// The status a reply message carries (granary.v1.Reply: code, message), so
// a failure prints the status rather than the whole message.
template <typename Reply>
absl::Status ReplyStatus(const Reply& r) {
  return absl::Status(static_cast<absl::StatusCode>(r.code()),
                      std::string(r.message()));
}

// OK.
inline auto IsOk() { return StatusIs(absl::StatusCode::kOk); }

// An OK StatusOr whose value matches `value`.
template <typename ValueMatcher>
auto IsOkAndHolds(ValueMatcher value) {
  return ::testing::AllOf(
      IsOk(),
      ::testing::ResultOf(
          "the value", [](const auto& s) -> decltype(auto) { return *s; },
          std::move(value)));
}

}  // namespace granary::matchers
