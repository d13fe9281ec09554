// EstimateParsedBytes (core/parsed_size.h): what a message takes parsed,
// from its wire bytes, against what protobuf says it takes
// (SpaceUsedLong), and hostile inputs.
#include "core/parsed_size.h"

#include <string>

#include "google/protobuf/struct.pb.h"
#include "granary/v1/gateway.pb.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

// Within a factor of what the parsed message holds, and never below it by
// more than malloc's rounding.
void ExpectNearParsed(const google::protobuf::Message& m) {
  const std::string wire = m.SerializeAsString();
  const int64_t estimate =
      EstimateParsedBytes(*m.GetDescriptor(), wire, INT64_MAX);
  std::unique_ptr<google::protobuf::Message> parsed(m.New());
  ASSERT_TRUE(parsed->ParseFromString(wire));
  const int64_t used = static_cast<int64_t>(parsed->SpaceUsedLong());
  EXPECT_GE(estimate, used * 3 / 4) << m.ShortDebugString();
  EXPECT_LE(estimate, used * 4 + 256) << m.ShortDebugString();
}

TEST(ParsedSizeTest, EstimatesOrdinaryMessagesNearTheirParsedSize) {
  v1::Request small;
  small.set_id(7);
  small.set_key("alice");
  small.set_method("granary.examples.Counter/Add");
  ExpectNearParsed(small);
  v1::RequestBatch batch;
  for (int i = 0; i < 1000; ++i) {
    v1::Request* r = batch.add_requests();
    r->set_id(i);
    r->set_key(std::string(40, 'k'));
    r->set_payload(std::string(100, 'p'));
    v1::ContextEntry* e = r->add_context();
    e->set_key("tenant");
    e->set_value("acme");
  }
  ExpectNearParsed(batch);
}

// Each 3-byte empty unknown field is an UnknownFieldSet entry and a heap
// string once parsed: the estimate says about 20x the wire, and stops
// early past the limit.
TEST(ParsedSizeTest, UnknownFieldsCountWhatTheyHoldParsed) {
  std::string wire;
  for (int i = 0; i < 100'000; ++i) wire += std::string{'\xC2', '\x3E', '\x00'};
  const int64_t full =
      EstimateParsedBytes(*v1::Request::descriptor(), wire, INT64_MAX);
  EXPECT_GE(full, 20 * static_cast<int64_t>(wire.size()));
  v1::Request parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_GE(full, static_cast<int64_t>(parsed.SpaceUsedLong()) / 2);
  const int64_t capped =
      EstimateParsedBytes(*v1::Request::descriptor(), wire, 1 << 20);
  EXPECT_GT(capped, 1 << 20);
  EXPECT_LT(capped, 2 << 20);  // stopped soon after the limit
}

// Repeated empty messages: two wire bytes, a heap object each.
TEST(ParsedSizeTest, RepeatedElementsCountTheirObjects) {
  std::string wire;
  for (int i = 0; i < 50'000; ++i)
    wire += std::string{'\x0A', '\x00'};  // requests: {}
  const int64_t estimate =
      EstimateParsedBytes(*v1::RequestBatch::descriptor(), wire, INT64_MAX);
  v1::RequestBatch parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_GE(estimate, static_cast<int64_t>(parsed.SpaceUsedLong()) / 2);
  EXPECT_GE(estimate, 20 * static_cast<int64_t>(wire.size()));
}

TEST(ParsedSizeTest, MalformedOrTooDeepBytesAreMinusOne) {
  const auto* d = v1::RequestBatch::descriptor();
  EXPECT_EQ(EstimateParsedBytes(*d, std::string("\x0A\x05\x01", 3), INT64_MAX),
            -1);  // short
  EXPECT_EQ(EstimateParsedBytes(*d, std::string("\x0C", 1), INT64_MAX),
            -1);  // END_GROUP
  EXPECT_EQ(EstimateParsedBytes(*d, std::string("\x00\x01", 2), INT64_MAX),
            -1);  // field 0
  EXPECT_EQ(EstimateParsedBytes(*d, std::string("\x08\xFF", 2), INT64_MAX),
            -1);  // varint
  EXPECT_GE(EstimateParsedBytes(*d, "", INT64_MAX), 0);
  // google.protobuf.Value nested 120 deep (Value -> Struct -> entry ->
  // Value: 360 messages), past protobuf's recursion limit of 100.
  auto field = [](char tag, const std::string& body) {
    std::string out(1, tag);
    for (uint64_t n = body.size();; n >>= 7) {
      if (n < 0x80) {
        out += static_cast<char>(n);
        break;
      }
      out += static_cast<char>((n & 0x7F) | 0x80);
    }
    return out + body;
  };
  std::string value;
  for (int i = 0; i < 120; ++i) {
    value = field('\x2A', field('\x0A', field('\x12', value)));
  }
  google::protobuf::Value parsed;
  EXPECT_FALSE(parsed.ParseFromString(value));  // the parser refuses it too
  EXPECT_EQ(EstimateParsedBytes(*google::protobuf::Value::descriptor(), value,
                                INT64_MAX),
            -1);
  std::string shallow;
  for (int i = 0; i < 10; ++i) {
    shallow = field('\x2A', field('\x0A', field('\x12', shallow)));
  }
  ASSERT_TRUE(parsed.ParseFromString(shallow));
  EXPECT_GT(EstimateParsedBytes(*google::protobuf::Value::descriptor(), shallow,
                                INT64_MAX),
            0);
}

}  // namespace
}  // namespace granary
