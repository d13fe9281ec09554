#include "core/parsed_size.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/call.h"
#include "core/grain_interface.h"
#include "core/request_context.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace granary {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// What parsed fields hold beyond their wire bytes (64-bit, glibc malloc):
constexpr int64_t kUnknownField = 16;  // an UnknownFieldSet entry
constexpr int64_t kString = 48;  // a heap std::string and its block header
constexpr int64_t kSlot = 8;     // a repeated field's element pointer or scalar
constexpr int kMaxDepth = 100;   // protobuf's default recursion limit

// A message object of `type`: its fields inline, and malloc's header.
int64_t MessageBytes(const Descriptor& type) {
  return 32 + 8 * static_cast<int64_t>(type.field_count());
}

int64_t Walk(const Descriptor& type, const uint8_t* data, int size,
             int64_t limit, int depth) {
  if (depth > kMaxDepth) return -1;
  google::protobuf::io::CodedInputStream in(data, size);
  int64_t total = MessageBytes(type);
  while (total <= limit) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return in.CurrentPosition() == size ? total : -1;
    const FieldDescriptor* field =
        type.FindFieldByNumber(static_cast<int>(tag >> 3));
    switch (WireFormatLite::GetTagWireType(tag)) {
      case WireFormatLite::WIRETYPE_VARINT: {
        uint64_t unused;
        if (!in.ReadVarint64(&unused)) return -1;
        total += field == nullptr       ? kUnknownField
                 : field->is_repeated() ? kSlot
                                        : 0;
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED64:
      case WireFormatLite::WIRETYPE_FIXED32: {
        const bool wide = WireFormatLite::GetTagWireType(tag) ==
                          WireFormatLite::WIRETYPE_FIXED64;
        if (!in.Skip(wide ? 8 : 4)) return -1;
        total += field == nullptr       ? kUnknownField
                 : field->is_repeated() ? kSlot
                                        : 0;
        break;
      }
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t length;
        if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(size))
          return -1;
        const int at = in.CurrentPosition();
        if (length > static_cast<uint32_t>(size - at)) return -1;
        if (field == nullptr) {
          total += kUnknownField + kString + length;
        } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
          const int64_t sub =
              Walk(*field->message_type(), data + at, static_cast<int>(length),
                   limit - total, depth + 1);
          if (sub < 0) return -1;
          total += sub + (field->is_repeated() ? kSlot : 0);
        } else if (field->type() == FieldDescriptor::TYPE_STRING ||
                   field->type() == FieldDescriptor::TYPE_BYTES) {
          total += kString + length + (field->is_repeated() ? kSlot : 0);
        } else {
          // Packed scalars: at most one element per byte, each 8 bytes wide.
          total += kSlot * static_cast<int64_t>(length);
        }
        if (!in.Skip(static_cast<int>(length))) return -1;
        break;
      }
      case WireFormatLite::WIRETYPE_START_GROUP: {
        // Groups (proto2) are kept as nested unknown fields: count every
        // byte of one as a field, the worst case.
        const int at = in.CurrentPosition();
        if (!WireFormatLite::SkipField(&in, tag)) return -1;
        total += kUnknownField *
                 (1 + static_cast<int64_t>(in.CurrentPosition() - at));
        break;
      }
      default:
        return -1;  // END_GROUP out of place, or no wire type
    }
  }
  return total;
}

}  // namespace

int64_t EstimateParsedBytes(const Descriptor& type, absl::string_view wire,
                            int64_t limit) {
  if (wire.size() > static_cast<size_t>(INT32_MAX)) return -1;
  return Walk(type, reinterpret_cast<const uint8_t*>(wire.data()),
              static_cast<int>(wire.size()), limit, 0);
}

absl::StatusOr<CallBase*> NewCallFromBytes(
    const InterfaceInfo& iface, const MethodInfo& method, std::string key,
    absl::string_view payload, absl::Duration timeout, int64_t max_parsed_bytes,
    int64_t* parsed_bytes) {
  CallBase* call = method.new_call(GrainId(iface.type_name, std::move(key)));
  const int64_t estimate = EstimateParsedBytes(*call->request().GetDescriptor(),
                                               payload, max_parsed_bytes);
  if (estimate > max_parsed_bytes) {
    absl::Status error = absl::ResourceExhaustedError(absl::StrCat(
        "the ", call->request().GetTypeName(), " of ", method.full_name, " (",
        payload.size(), " bytes) would take more than ", max_parsed_bytes,
        " bytes once parsed: it holds too many fields or elements"));
    call->Release();
    return error;
  }
  if (parsed_bytes != nullptr) *parsed_bytes = estimate;
  // Malformed bytes (estimate -1) fail here, as the parser says.
  if (!call->request().ParseFromArray(payload.data(),
                                      static_cast<int>(payload.size()))) {
    absl::Status error = absl::InvalidArgumentError(
        absl::StrCat("payload is not a valid ", call->request().GetTypeName(),
                     " for ", method.full_name));
    call->Release();
    return error;
  }
  call->set_timeout(timeout);
  call->set_request_context(RootContext());
  return call;
}

}  // namespace granary
