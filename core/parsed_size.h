// File: core/parsed_size.h
// -----------------------------------------------------------------------------
// How much memory a serialized message takes once parsed, estimated from
// its wire bytes without parsing them.
//
//   int64_t bytes = EstimateParsedBytes(*AddRequest::descriptor(), wire,
//   limit); if (bytes < 0) ...            // malformed: the parser will say how
//   else if (bytes > limit) ...   // refuse it before it is parsed
//
// A parsed message can be far larger than its wire form: an empty unknown
// field is two bytes on the wire and an UnknownFieldSet entry with a heap
// string once parsed (about 30x); a repeated element of an empty message is
// a heap object. Budgets that charge wire bytes undercount that, and a
// parse of a hostile 4 MB message allocates a hundred MiB before anyone
// can refuse it. This walks the wire bytes once, with the message's
// descriptor, and adds up what each field will hold (an upper estimate):
// the message objects, every string's heap block, repeated slots, unknown
// fields. It stops early once past `limit`.
//
// Threading: pure function.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace google::protobuf {
class Descriptor;
}

namespace granary {

class CallBase;
struct InterfaceInfo;
struct MethodInfo;

// The estimate for `wire` parsed as a `type` message, the message object
// itself included; something past `limit` once it is over (the walk stops
// there); -1 when `wire` is malformed or nests deeper than protobuf's
// parser allows (100).
int64_t EstimateParsedBytes(const google::protobuf::Descriptor& type,
                            absl::string_view wire, int64_t limit);

// NewCallFromWire (core/grain_interface.h) from contiguous bytes, which
// first estimates the request's parsed size: RESOURCE_EXHAUSTED, before
// anything is parsed, past `max_parsed_bytes`. `*parsed_bytes`, when given,
// gets the estimate (what the request will hold, for budgets).
absl::StatusOr<CallBase*> NewCallFromBytes(
    const InterfaceInfo& iface, const MethodInfo& method, std::string key,
    absl::string_view payload, absl::Duration timeout, int64_t max_parsed_bytes,
    int64_t* parsed_bytes);

}  // namespace granary
