#include "proto/codegen/interface_shape.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "granary/options.pb.h"
#include "proto/codegen/reparse.h"

namespace granary::codegen {
namespace {

namespace pb = ::google::protobuf;

const char* LabelName(const pb::FieldDescriptor& f) {
  if (f.is_map()) return "map";
  if (f.is_repeated()) return "repeated";
  if (f.has_presence() && f.containing_oneof() == nullptr) return "optional";
  return "singular";
}

}  // namespace

std::string InterfaceShape(const pb::ServiceDescriptor& service) {
  std::string out = absl::StrCat("service ", service.full_name(), "\n");
  std::vector<const pb::MethodDescriptor*> methods;
  for (int i = 0; i < service.method_count(); ++i) {
    methods.push_back(service.method(i));
  }
  std::sort(methods.begin(), methods.end(),
            [](const pb::MethodDescriptor* a, const pb::MethodDescriptor* b) {
              return a->name() < b->name();
            });
  // The messages the methods reach, by full name (so each appears once,
  // in an order that does not depend on the file's).
  std::map<std::string, const pb::Descriptor*> messages;
  std::vector<const pb::Descriptor*> todo;
  auto reach = [&](const pb::Descriptor* d) {
    if (d != nullptr && messages.emplace(d->full_name(), d).second) {
      todo.push_back(d);
    }
  };
  for (const pb::MethodDescriptor* m : methods) {
    MethodOptions o = Reparse(m->options()).GetExtension(granary::method);
    absl::StrAppend(
        &out, "rpc ", m->name(), " ", m->input_type()->full_name(), " ",
        m->output_type()->full_name(), m->server_streaming() ? " stream" : "",
        o.one_way() ? " one_way" : "", o.read_only() ? " read_only" : "",
        o.always_interleave() ? " always_interleave" : "", "\n");
    reach(m->input_type());
    reach(m->output_type());
  }
  while (!todo.empty()) {
    const pb::Descriptor* d = todo.back();
    todo.pop_back();
    for (int i = 0; i < d->field_count(); ++i)
      reach(d->field(i)->message_type());
  }
  for (const auto& [name, d] : messages) {
    absl::StrAppend(&out, "message ", name, "\n");
    std::vector<const pb::FieldDescriptor*> fields;
    for (int i = 0; i < d->field_count(); ++i) fields.push_back(d->field(i));
    std::sort(fields.begin(), fields.end(),
              [](const pb::FieldDescriptor* a, const pb::FieldDescriptor* b) {
                return a->number() < b->number();
              });
    for (const pb::FieldDescriptor* f : fields) {
      absl::StrAppend(&out, "  ", f->number(), " ", LabelName(*f), " ",
                      f->type_name());
      if (f->message_type() != nullptr) {
        absl::StrAppend(&out, " ", f->message_type()->full_name());
      }
      if (f->enum_type() != nullptr) {
        absl::StrAppend(&out, " ", f->enum_type()->full_name());
      }
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t InterfaceFingerprint(const pb::ServiceDescriptor& service) {
  return Fnv1a64(InterfaceShape(service));
}

}  // namespace granary::codegen
