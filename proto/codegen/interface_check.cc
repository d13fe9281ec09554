#include "proto/codegen/interface_check.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "granary/options.pb.h"
#include "proto/codegen/reparse.h"

namespace granary::codegen {
namespace {

namespace pb = ::google::protobuf;

GrainOptions GrainOptionsOf(const pb::ServiceDescriptor& service) {
  return Reparse(service.options()).GetExtension(granary::grain);
}

MethodOptions MethodOptionsOf(const pb::MethodDescriptor& method) {
  return Reparse(method.options()).GetExtension(granary::method);
}

// Field types that read each other's encoding: the same wire type and the
// same encoding of values (a value may be truncated, never misread as
// another field). Every other change of type is breaking.
int WireGroup(pb::FieldDescriptor::Type type) {
  switch (type) {
    case pb::FieldDescriptor::TYPE_INT32:
    case pb::FieldDescriptor::TYPE_UINT32:
    case pb::FieldDescriptor::TYPE_INT64:
    case pb::FieldDescriptor::TYPE_UINT64:
    case pb::FieldDescriptor::TYPE_BOOL:
    case pb::FieldDescriptor::TYPE_ENUM:
      return 1;
    case pb::FieldDescriptor::TYPE_SINT32:
    case pb::FieldDescriptor::TYPE_SINT64:
      return 2;
    case pb::FieldDescriptor::TYPE_FIXED32:
    case pb::FieldDescriptor::TYPE_SFIXED32:
      return 3;
    case pb::FieldDescriptor::TYPE_FIXED64:
    case pb::FieldDescriptor::TYPE_SFIXED64:
      return 4;
    case pb::FieldDescriptor::TYPE_STRING:
    case pb::FieldDescriptor::TYPE_BYTES:
      return 5;
    default:  // float, double, message, group: each only itself
      return 100 + static_cast<int>(type);
  }
}

// Length-delimited values: a repeated field reads a singular one's value as
// one element, a singular field keeps the last of a repeated one's.
bool LengthDelimited(const pb::FieldDescriptor& f) {
  return f.type() == pb::FieldDescriptor::TYPE_STRING ||
         f.type() == pb::FieldDescriptor::TYPE_BYTES ||
         f.type() == pb::FieldDescriptor::TYPE_MESSAGE;
}

const char* Cardinality(const pb::FieldDescriptor& f) {
  if (f.is_map()) return "map";
  return f.is_repeated() ? "repeated" : "singular";
}

std::string TypeName(const pb::FieldDescriptor& f) {
  if (f.is_map()) {
    return absl::StrCat("map<", TypeName(*f.message_type()->map_key()), ", ",
                        TypeName(*f.message_type()->map_value()), ">");
  }
  if (f.message_type() != nullptr) return f.message_type()->full_name();
  if (f.enum_type() != nullptr) return f.enum_type()->full_name();
  return f.type_name();
}

const char* YesNo(bool b) { return b ? "true" : "false"; }

// One CheckInterface: the problems found so far, sorted into breaking ones
// (fine with a version bump) and the rest.
class InterfaceChecker {
 public:
  InterfaceChecker(const pb::ServiceDescriptor& baseline,
                   const pb::ServiceDescriptor& updated)
      : old_(baseline), new_(updated) {}

  std::vector<std::string> Run() {
    if (old_.full_name() != new_.full_name()) {
      return {absl::StrCat(new_.full_name(), ": compared with ",
                           old_.full_name(),
                           ", another interface (the check compares two "
                           "releases of one service)")};
    }
    const uint32_t old_version = GrainVersion(old_);
    const uint32_t new_version = GrainVersion(new_);
    if (new_version < old_version) {
      problems_.push_back(absl::StrCat(
          old_.full_name(), ": version went down ", "from ", old_version,
          " to ", new_version, " (a release never lowers it)"));
    }
    CheckGrainOptions();
    for (int i = 0; i < old_.method_count(); ++i) CheckMethod(*old_.method(i));
    std::vector<std::string> added;
    for (int i = 0; i < new_.method_count(); ++i) {
      const pb::MethodDescriptor& m = *new_.method(i);
      if (old_.FindMethodByName(m.name()) == nullptr) added.push_back(m.name());
    }
    if (new_version > old_version) return std::move(problems_);
    const std::string bump = absl::StrCat(
        "bump the version of ", old_.full_name(), " to ", old_version + 1);
    for (const std::string& b : breaking_) {
      problems_.push_back(absl::StrCat(b, " (breaking: ", bump, ")"));
    }
    for (const std::string& name : added) {
      problems_.push_back(
          absl::StrCat(old_.full_name(), ": method ", name, " is new: ", bump));
    }
    return std::move(problems_);
  }

 private:
  void Breaking(std::string problem) {
    breaking_.push_back(std::move(problem));
  }

  void CheckGrainOptions() {
    const GrainOptions o = GrainOptionsOf(old_);
    const GrainOptions n = GrainOptionsOf(new_);
    if (o.stateless_worker() != n.stateless_worker()) {
      Breaking(absl::StrCat(
          old_.full_name(), ": grain option stateless_worker changed from ",
          YesNo(o.stateless_worker()), " to ", YesNo(n.stateless_worker())));
    }
    if (o.state() != n.state()) {
      Breaking(absl::StrCat(old_.full_name(), ": grain option state changed ",
                            "from \"", o.state(), "\" to \"", n.state(), "\""));
    }
  }

  void CheckMethod(const pb::MethodDescriptor& m) {
    const std::string where = absl::StrCat(old_.full_name(), ".", m.name());
    const pb::MethodDescriptor* n = new_.FindMethodByName(m.name());
    if (n == nullptr) {
      Breaking(absl::StrCat(where, ": method ", m.name(),
                            " was removed or renamed (callers call it by "
                            "name, /",
                            old_.full_name(), "/", m.name(), ")"));
      return;
    }
    CheckType(where, "request", *m.input_type(), *n->input_type());
    CheckType(where, "response", *m.output_type(), *n->output_type());
    if (m.server_streaming() != n->server_streaming()) {
      Breaking(absl::StrCat(where, ": server streaming changed from ",
                            YesNo(m.server_streaming()), " to ",
                            YesNo(n->server_streaming())));
    }
    const MethodOptions o = MethodOptionsOf(m);
    const MethodOptions p = MethodOptionsOf(*n);
    const std::pair<const char*, std::pair<bool, bool>> flags[] = {
        {"one_way", {o.one_way(), p.one_way()}},
        {"read_only", {o.read_only(), p.read_only()}},
        {"always_interleave", {o.always_interleave(), p.always_interleave()}}};
    for (const auto& [name, values] : flags) {
      if (values.first != values.second) {
        Breaking(absl::StrCat(where, ": ", name, " changed from ",
                              YesNo(values.first), " to ",
                              YesNo(values.second)));
      }
    }
  }

  void CheckType(const std::string& where, const char* role,
                 const pb::Descriptor& o, const pb::Descriptor& n) {
    if (o.full_name() != n.full_name()) {
      Breaking(absl::StrCat(where, ": ", role, " type changed from ",
                            o.full_name(), " to ", n.full_name()));
      return;
    }
    CheckMessage(where, o, n);
  }

  // Each pair of message types once per interface: recursive types end,
  // and a message that several methods use is reported once.
  void CheckMessage(const std::string& where, const pb::Descriptor& o,
                    const pb::Descriptor& n) {
    if (!seen_.emplace(o.full_name(), n.full_name()).second) return;
    for (int i = 0; i < o.field_count(); ++i) {
      const pb::FieldDescriptor& f = *o.field(i);
      const std::string field =
          absl::StrCat(where, ": message ", o.full_name(), " field ",
                       f.number(), " (", f.name(), ")");
      const pb::FieldDescriptor* g = n.FindFieldByNumber(f.number());
      if (g == nullptr) {
        const pb::FieldDescriptor* moved = n.FindFieldByName(f.name());
        if (moved != nullptr) {
          Breaking(absl::StrCat(field, ": number changed from ", f.number(),
                                " to ", moved->number(),
                                " (the wire knows fields by number)"));
        } else if (!n.IsReservedNumber(f.number())) {
          Breaking(absl::StrCat(field, ": removed without reserving its ",
                                "number (add `reserved ", f.number(),
                                ";` so it is never used again)"));
        }
        continue;
      }
      CheckField(field, where, f, *g);
    }
    for (int i = 0; i < n.field_count(); ++i) {
      const pb::FieldDescriptor& g = *n.field(i);
      if (o.FindFieldByNumber(g.number()) == nullptr &&
          o.IsReservedNumber(g.number())) {
        Breaking(absl::StrCat(where, ": message ", o.full_name(), " field ",
                              g.number(), " (", g.name(),
                              "): uses a reserved number (a removed field's "
                              "old values would read as this one)"));
      }
    }
  }

  void CheckField(const std::string& field, const std::string& where,
                  const pb::FieldDescriptor& f, const pb::FieldDescriptor& g) {
    const std::string from = Cardinality(f);
    const std::string to = Cardinality(g);
    if (f.is_map() && g.is_map()) {
      // The entries are messages of key 1 and value 2: compare those.
      const pb::FieldDescriptor& fk = *f.message_type()->map_key();
      const pb::FieldDescriptor& fv = *f.message_type()->map_value();
      const pb::FieldDescriptor& gk = *g.message_type()->map_key();
      const pb::FieldDescriptor& gv = *g.message_type()->map_value();
      if (WireGroup(fk.type()) != WireGroup(gk.type()) ||
          WireGroup(fv.type()) != WireGroup(gv.type())) {
        Breaking(absl::StrCat(field, ": type changed from ", TypeName(f),
                              " to ", TypeName(g), " (not wire-compatible)"));
      } else if (fv.message_type() != nullptr) {
        CheckMessage(where, *fv.message_type(), *gv.message_type());
      }
      return;
    }
    if (from != to && (f.is_map() || g.is_map() || !LengthDelimited(f) ||
                       !LengthDelimited(g))) {
      Breaking(absl::StrCat(field, ": changed from ", from, " ", TypeName(f),
                            " to ", to, " ", TypeName(g)));
      return;
    }
    if (WireGroup(f.type()) != WireGroup(g.type())) {
      Breaking(absl::StrCat(field, ": type changed from ", TypeName(f), " to ",
                            TypeName(g), " (not wire-compatible)"));
      return;
    }
    if (f.message_type() != nullptr && g.message_type() != nullptr) {
      CheckMessage(where, *f.message_type(), *g.message_type());
    }
  }

  const pb::ServiceDescriptor& old_;
  const pb::ServiceDescriptor& new_;
  std::vector<std::string> problems_;
  std::vector<std::string> breaking_;
  std::set<std::pair<std::string, std::string>> seen_;
};

}  // namespace

bool IsGrain(const pb::ServiceDescriptor& service) {
  return Reparse(service.options()).HasExtension(granary::grain);
}

uint32_t GrainVersion(const pb::ServiceDescriptor& service) {
  return std::max<uint32_t>(1, GrainOptionsOf(service).version());
}

std::vector<std::string> CheckInterface(const pb::ServiceDescriptor& baseline,
                                        const pb::ServiceDescriptor& updated) {
  return InterfaceChecker(baseline, updated).Run();
}

std::vector<std::string> CheckFile(const pb::FileDescriptor& baseline,
                                   const pb::DescriptorPool& updated) {
  std::vector<std::string> problems;
  for (int i = 0; i < baseline.service_count(); ++i) {
    const pb::ServiceDescriptor& old = *baseline.service(i);
    if (!IsGrain(old)) continue;
    const pb::ServiceDescriptor* now =
        updated.FindServiceByName(old.full_name());
    if (now == nullptr) {
      problems.push_back(absl::StrCat(
          old.full_name(), ": grain interface removed (from ", baseline.name(),
          "); its callers and stored grains still use it"));
    } else if (!IsGrain(*now)) {
      problems.push_back(absl::StrCat(old.full_name(),
                                      ": no longer a grain (the "
                                      "(granary.grain) option was removed)"));
    } else {
      std::vector<std::string> found = CheckInterface(old, *now);
      problems.insert(problems.end(), found.begin(), found.end());
    }
  }
  return problems;
}

}  // namespace granary::codegen
