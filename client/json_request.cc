#include "client/json_request.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"

namespace granary::cli {

namespace pb = google::protobuf;

absl::StatusOr<std::string> RequestFromJson(const pb::Descriptor& input,
                                            const std::string& json) {
  pb::DynamicMessageFactory factory(input.file()->pool());
  std::unique_ptr<pb::Message> request(factory.GetPrototype(&input)->New());
  pb::util::JsonParseOptions parse;
  if (auto s = pb::util::JsonStringToMessage(json, request.get(), parse);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request is not valid JSON for ", input.full_name(), ": ",
                     s.message().as_string()));
  }
  std::string bytes;
  request->SerializeToString(&bytes);
  return bytes;
}

absl::StatusOr<std::string> ReplyToJson(const pb::Descriptor& output,
                                        const std::string& bytes) {
  pb::DynamicMessageFactory factory(output.file()->pool());
  std::unique_ptr<pb::Message> reply(factory.GetPrototype(&output)->New());
  if (!reply->ParseFromString(bytes)) {
    return absl::InternalError(
        absl::StrCat("reply is not a valid ", output.full_name()));
  }
  pb::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;
  std::string out;
  if (auto s = pb::util::MessageToJsonString(*reply, &out, print); !s.ok()) {
    return absl::InternalError(s.message().as_string());
  }
  return out;
}

}  // namespace granary::cli
