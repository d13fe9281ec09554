// File: client/json_request.h
// -----------------------------------------------------------------------------
// The JSON side of `granary call`: a request typed on the command line as
// JSON (the proto3 JSON mapping) becomes the bytes of the request message,
// and the reply's bytes become the JSON the tool prints. The message types
// come from a descriptor pool (the CLI's is filled by server reflection), so
// the tool calls grain types it was never built with.
//
//   const Descriptor* input = pool.FindMessageTypeByName(
//       "granary.examples.AddRequest");
//   absl::StatusOr<std::string> bytes = RequestFromJson(*input,
//                                                       R"({"amount": 5})");
//   ...
//   absl::StatusOr<std::string> json = ReplyToJson(*output, reply_bytes);
//   // {"value":"5"}
//
// Threading: thread-safe for distinct pools; the messages are made by a
// DynamicMessageFactory of the descriptors' pool for each call.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace google::protobuf {
class Descriptor;
}  // namespace google::protobuf

namespace granary::cli {

// The serialized message of type `input` that `json` describes;
// INVALID_ARGUMENT (naming the type and the parser's complaint) when it is
// not valid JSON for that type.
absl::StatusOr<std::string> RequestFromJson(
    const google::protobuf::Descriptor& input, const std::string& json);

// `bytes`, a serialized message of type `output`, as JSON with every field
// printed (also those at their default); INTERNAL when the bytes do not
// parse as that type.
absl::StatusOr<std::string> ReplyToJson(
    const google::protobuf::Descriptor& output, const std::string& bytes);

}  // namespace granary::cli
