// Fuzzes the JSON side of `granary call` (client/json_request.h): JSON text
// typed on the command line turned into a request message, and reply bytes
// from a silo turned into the JSON the tool prints. The message types come,
// as in the CLI, from a descriptor pool built from file descriptors (the
// CLI gets them by server reflection): here the example grains' protos, the
// gateway protocol's, and their imports; the messages are dynamic.
//
// Input layout:
//   byte 0   bit 0: 0 JSON request, 1 reply bytes
//   byte 1   message type (index into every message type of the pool, by
//            full name)
//   rest     the JSON text or the reply bytes
// Checked: JSON that parses gives bytes whose JSON parses back to the same
// message; reply bytes that print give JSON that, when it parses, gives an
// equivalent message (unknown fields, which JSON does not carry, aside).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/json_request.h"
#include "examples/alarm.pb.h"
#include "examples/bank.pb.h"
#include "examples/counter.pb.h"
#include "examples/ping.pb.h"
#include "fuzz/fuzz_support.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/descriptor_database.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/util/message_differencer.h"
#include "granary/v1/cluster.pb.h"
#include "granary/v1/gateway.pb.h"

namespace granary::fuzz {
namespace {

namespace pb = google::protobuf;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "cli_json: %s\n", what.c_str());
  std::abort();
}

// What the CLI assembles from server reflection: a database of file
// descriptors and a pool over it.
struct Pool {
  pb::SimpleDescriptorDatabase database;
  pb::DescriptorPool pool{&database};
  std::vector<const pb::Descriptor*> types;
};
Pool* pool = nullptr;

void AddFile(const pb::FileDescriptor* file, std::set<std::string>* added) {
  if (!added->insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddFile(file->dependency(i), added);
  }
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  pool->database.Add(proto);
}

void AddTypes(const pb::Descriptor* d) {
  pool->types.push_back(d);
  for (int i = 0; i < d->nested_type_count(); ++i) {
    if (!d->nested_type(i)->options().map_entry()) AddTypes(d->nested_type(i));
  }
}

// The message `bytes` holds, as a dynamic message of `type`.
std::unique_ptr<pb::Message> Parse(pb::DynamicMessageFactory& factory,
                                   const pb::Descriptor& type,
                                   const std::string& bytes) {
  std::unique_ptr<pb::Message> m(factory.GetPrototype(&type)->New());
  if (!m->ParseFromString(bytes)) {
    Fail(absl::StrCat("bytes made from JSON do not parse as ",
                      type.full_name()));
  }
  return m;
}

void Run(const uint8_t* data, size_t size) {
  InputReader in(data, size);
  const bool reply_mode = (in.Byte() & 1) != 0;
  const pb::Descriptor& type = *pool->types[in.Byte() % pool->types.size()];
  const std::string text(in.Rest());
  pb::DynamicMessageFactory factory(&pool->pool);

  if (!reply_mode) {
    absl::StatusOr<std::string> bytes = cli::RequestFromJson(type, text);
    if (!bytes.ok()) return;
    absl::StatusOr<std::string> json = cli::ReplyToJson(type, *bytes);
    if (!json.ok()) {
      Fail(absl::StrCat("a request made from JSON does not print: ",
                        json.status().ToString()));
    }
    absl::StatusOr<std::string> again = cli::RequestFromJson(type, *json);
    if (!again.ok()) {
      Fail(absl::StrCat("printed JSON ", *json,
                        " does not parse: ", again.status().ToString()));
    }
    if (!pb::util::MessageDifferencer::Equals(*Parse(factory, type, *bytes),
                                              *Parse(factory, type, *again))) {
      Fail(absl::StrCat("JSON ", *json, " does not parse back to the same ",
                        type.full_name()));
    }
    return;
  }

  absl::StatusOr<std::string> json = cli::ReplyToJson(type, text);
  if (!json.ok()) return;
  // Not always JSON that parses: a map entry repeated on the wire is
  // printed once per entry, and the parser refuses a repeated key.
  absl::StatusOr<std::string> bytes = cli::RequestFromJson(type, *json);
  if (!bytes.ok()) return;
  std::unique_ptr<pb::Message> sent(factory.GetPrototype(&type)->New());
  if (!sent->ParseFromString(text)) Fail("a printed reply does not parse");
  std::unique_ptr<pb::Message> back = Parse(factory, type, *bytes);
  // Equivalent: unknown fields (JSON drops them) are not compared.
  if (!pb::util::MessageDifferencer::Equivalent(*sent, *back)) {
    Fail(absl::StrCat("reply JSON ", *json,
                      " does not parse back to the "
                      "same ",
                      type.full_name(), ": ", sent->ShortDebugString(),
                      " became ", back->ShortDebugString()));
  }
}

}  // namespace
}  // namespace granary::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace granary::fuzz;
  QuietLogs();
  pool = new Pool;
  std::set<std::string> added;
  const pb::FileDescriptor* files[] = {
      granary::examples::AddRequest::descriptor()->file(),
      granary::examples::PingRequest::descriptor()->file(),
      granary::examples::Amount::descriptor()->file(),
      granary::examples::SetAlarmRequest::descriptor()->file(),
      granary::v1::RequestBatch::descriptor()->file(),
      granary::v1::MembershipView::descriptor()->file(),
  };
  for (const pb::FileDescriptor* file : files) AddFile(file, &added);
  for (const pb::FileDescriptor* generated : files) {
    const pb::FileDescriptor* file =
        pool->pool.FindFileByName(generated->name());
    if (file == nullptr) Fail("the pool lacks " + generated->name());
    for (int i = 0; i < file->message_type_count(); ++i) {
      AddTypes(file->message_type(i));
    }
  }
  std::sort(pool->types.begin(), pool->types.end(),
            [](const pb::Descriptor* a, const pb::Descriptor* b) {
              return a->full_name() < b->full_name();
            });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > granary::fuzz::kMaxInputBytes) return -1;
  granary::fuzz::Run(data, size);
  return 0;
}
