#include "proto/codegen/generator.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/labels.h"
#include "google/protobuf/compiler/cpp/names.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/io/printer.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "granary/options.pb.h"
#include "proto/codegen/grain_options_check.h"
#include "proto/codegen/interface_shape.h"
#include "proto/codegen/reparse.h"

namespace granary::codegen {
namespace {

namespace pb = ::google::protobuf;
using ::google::protobuf::compiler::cpp::QualifiedClassName;

struct Method {
  const pb::MethodDescriptor* desc;
  MethodOptions options;
};

struct Grain {
  const pb::ServiceDescriptor* desc;
  GrainOptions options;
  std::vector<Method> methods;
};

// Names the grain base class and references already use; an rpc with one of
// these names would not compile, so it is refused with a clear message.
const std::set<std::string>& ReservedNames() {
  static const auto* names = new std::set<std::string>{
      "OnActivate",   "OnDeactivate", "DeactivateOnIdle",
      "GetGrainId",   "GetGrain",     "RegisterTimer",
      "ActivationId", "SiloName",     "Interface",
      "ClassInfo",    "id",           "invoker",
      "Now",          "Ref",          "state",
      "PersistState", "WriteState",   "ClearState",
      "StateEtag"};
  return *names;
}

bool Collect(const pb::FileDescriptor* file, std::vector<Grain>* grains,
             std::string* error) {
  for (int i = 0; i < file->service_count(); ++i) {
    const pb::ServiceDescriptor* service = file->service(i);
    pb::ServiceOptions sopts = Reparse(service->options());
    bool is_grain = sopts.HasExtension(granary::grain);
    Grain g{service, sopts.GetExtension(granary::grain), {}};
    if (is_grain && !granary::Placement_IsValid(g.options.placement())) {
      *error = absl::StrCat(Where(file, service), ": unknown placement ",
                            g.options.placement(),
                            " (expected RANDOM, PREFER_LOCAL, HASH, "
                            "ACTIVATION_COUNT or RESOURCE_OPTIMIZED)");
      return false;
    }
    if (is_grain && !GrainOptionsValid(file, service, g.options, error)) {
      return false;
    }
    for (int m = 0; m < service->method_count(); ++m) {
      const pb::MethodDescriptor* method = service->method(m);
      pb::MethodOptions mopts = Reparse(method->options());
      bool has_method_opts = mopts.HasExtension(granary::method);
      MethodOptions o = mopts.GetExtension(granary::method);
      if (!is_grain) {
        if (has_method_opts) {
          *error = absl::StrCat(Where(file, service, method),
                                ": (granary.method) is set but the service is "
                                "not marked with (granary.grain)");
          return false;
        }
        continue;
      }
      if (method->client_streaming()) {
        *error = absl::StrCat(Where(file, service, method),
                              ": client-streaming methods cannot be grain "
                              "methods (send one call per message, or a "
                              "repeated field)");
        return false;
      }
      if (method->server_streaming() && o.one_way()) {
        *error = absl::StrCat(Where(file, service, method),
                              ": a server-streaming method cannot be one_way "
                              "(its caller reads the stream)");
        return false;
      }
      if (o.one_way() &&
          method->output_type()->full_name() != "google.protobuf.Empty") {
        *error = absl::StrCat(Where(file, service, method),
                              ": one_way methods must return "
                              "google.protobuf.Empty, not ",
                              method->output_type()->full_name());
        return false;
      }
      if (o.one_way() && o.read_only()) {
        *error = absl::StrCat(Where(file, service, method),
                              ": a one_way method cannot be read_only (it "
                              "returns nothing to read)");
        return false;
      }
      if (ReservedNames().count(method->name()) > 0) {
        *error =
            absl::StrCat(Where(file, service, method), ": the name ",
                         method->name(), " is reserved by the grain runtime");
        return false;
      }
      g.methods.push_back(Method{method, o});
    }
    if (is_grain) grains->push_back(std::move(g));
  }
  return true;
}

std::string Namespace(const pb::FileDescriptor* file) {
  return absl::StrReplaceAll(file->package(), {{".", "::"}});
}

std::string Stem(const pb::FileDescriptor* file) {
  std::string name = file->name();
  if (absl::EndsWith(name, ".proto")) name.resize(name.size() - 6);
  return name;
}

// The C++ type a grain method returns: Task<void> for one-way and
// streaming methods.
std::string ReplyType(const Method& m) {
  return m.options.one_way() || m.desc->server_streaming()
             ? "void"
             : QualifiedClassName(m.desc->output_type());
}

void OpenNamespace(pb::io::Printer& p, const pb::FileDescriptor* file) {
  if (!file->package().empty())
    p.Print("namespace $ns$ {\n\n", "ns", Namespace(file));
}

void CloseNamespace(pb::io::Printer& p, const pb::FileDescriptor* file) {
  if (!file->package().empty())
    p.Print("}  // namespace $ns$\n", "ns", Namespace(file));
}

void WriteRefHeader(const pb::FileDescriptor* file,
                    const std::vector<Grain>& grains, pb::io::Printer& p) {
  p.Print(
      "// Generated by protoc-gen-granary from $file$. Do not edit.\n"
      "// Grain references: typed handles for calling the grains of this "
      "file.\n"
      "#pragma once\n\n"
      "#include <string>\n\n"
      "#include \"core/call.h\"\n"
      "#include \"core/grain_interface.h\"\n"
      "#include \"core/stream.h\"\n"
      "#include \"$stem$.pb.h\"\n\n",
      "file", file->name(), "stem", Stem(file));
  OpenNamespace(p, file);
  for (const Grain& g : grains) {
    std::map<std::string, std::string> vars{{"name", g.desc->name()},
                                            {"full", g.desc->full_name()}};
    p.Print(vars,
            "// A reference to a $full$ grain. Cheap to copy; calling it never "
            "needs the\n// grain to exist (the runtime activates it).\n"
            "class $name$Ref : public ::granary::GrainRef {\n"
            " public:\n"
            "  static constexpr ::absl::string_view kTypeName = \"$full$\";\n"
            "  static const ::granary::InterfaceInfo& Interface();\n\n");
    p.Print("  enum Method : uint32_t {\n");
    for (size_t i = 0; i < g.methods.size(); ++i) {
      p.Print("    k$m$ = $i$,\n", "m", g.methods[i].desc->name(), "i",
              absl::StrCat(i));
    }
    p.Print(vars,
            "  };\n\n"
            "  // Bound to the runtime of the grain code that uses it.\n"
            "  explicit $name$Ref(std::string key)\n"
            "      : GrainRef(nullptr, ::granary::GrainId(kTypeName, "
            "std::move(key))) {}\n"
            "  $name$Ref(::granary::CallInvoker* invoker, std::string key)\n"
            "      : GrainRef(invoker, ::granary::GrainId(kTypeName, "
            "std::move(key))) {}\n\n");
    for (const Method& m : g.methods) {
      std::map<std::string, std::string> mv{
          {"m", m.desc->name()},
          {"req", QualifiedClassName(m.desc->input_type())},
          {"rep", QualifiedClassName(m.desc->output_type())}};
      if (m.options.one_way()) {
        p.Print(mv,
                "  // One-way: returns once sent; nothing comes back.\n"
                "  void $m$($req$ request) const;\n");
      } else if (m.desc->server_streaming()) {
        p.Print(mv,
                "  // Server streaming: read the grain's messages from the "
                "stream (no\n"
                "  // deadline unless options.timeout is set).\n"
                "  ::granary::Stream<$rep$> $m$($req$ request,\n"
                "      ::granary::CallOptions options = {}) const;\n");
      } else {
        p.Print(mv,
                "  ::granary::Task<$rep$> $m$($req$ request,\n"
                "      ::granary::CallOptions options = {}) const;\n");
      }
    }
    p.Print("};\n\n");
  }
  CloseNamespace(p, file);
}

void WriteRefSource(const pb::FileDescriptor* file,
                    const std::vector<Grain>& grains, pb::io::Printer& p) {
  p.Print(
      "// Generated by protoc-gen-granary from $file$. Do not edit.\n"
      "#include \"$stem$.granary.h\"\n\n"
      "#include \"google/protobuf/empty.pb.h\"\n\n",
      "file", file->name(), "stem", Stem(file));
  OpenNamespace(p, file);
  for (const Grain& g : grains) {
    std::map<std::string, std::string> vars{
        {"name", g.desc->name()},
        {"full", g.desc->full_name()},
        {"reentrant", g.options.reentrant() ? "true" : "false"},
        {"idle", absl::StrCat(g.options.idle_timeout_s())},
        {"placement", absl::StrCat(static_cast<int>(g.options.placement()))},
        {"stateless", g.options.stateless_worker() ? "true" : "false"},
        {"max_workers", absl::StrCat(g.options.max_local_workers())},
        {"count", absl::StrCat(g.methods.size())},
        {"version", absl::StrCat(std::max<uint32_t>(1, g.options.version()))},
        {"fingerprint",
         absl::StrCat(
             "0x", absl::Hex(InterfaceFingerprint(*g.desc), absl::kZeroPad16))},
        {"filter", absl::CEscape(FormatLabels(
                       *ParseLabels(g.options.placement_filter())))}};
    p.Print("namespace {\n\n");
    for (const Method& m : g.methods) {
      if (m.desc->server_streaming()) {
        p.Print(
            "::granary::CallBase* New$name$$m$Call(::granary::GrainId id) {\n"
            "  return ::granary::internal::NewStreamCall<$req$, $rep$>(\n"
            "      std::move(id), $name$Ref::k$m$);\n"
            "}\n\n",
            "name", g.desc->name(), "m", m.desc->name(), "req",
            QualifiedClassName(m.desc->input_type()), "rep",
            QualifiedClassName(m.desc->output_type()));
        continue;
      }
      p.Print(
          "::granary::CallBase* New$name$$m$Call(::granary::GrainId id) {\n"
          "  return new ::granary::Call<$req$, $rep$>(std::move(id), "
          "$name$Ref::k$m$, $ow$);\n"
          "}\n\n",
          "name", g.desc->name(), "m", m.desc->name(), "req",
          QualifiedClassName(m.desc->input_type()), "rep",
          QualifiedClassName(m.desc->output_type()), "ow",
          m.options.one_way() ? "true" : "false");
    }
    p.Print(vars, "const ::granary::MethodInfo k$name$Methods[] = {\n");
    for (size_t i = 0; i < g.methods.size(); ++i) {
      const Method& m = g.methods[i];
      p.Print(
          "    {$i$, \"$m$\", \"/$full$/$m$\", $ow$, $ro$, $ai$, "
          "&New$name$$m$Call, $ss$},\n",
          "ss", m.desc->server_streaming() ? "true" : "false", "i",
          absl::StrCat(i), "m", m.desc->name(), "full", g.desc->full_name(),
          "ow", m.options.one_way() ? "true" : "false", "ro",
          m.options.read_only() ? "true" : "false", "ai",
          m.options.always_interleave() ? "true" : "false", "name",
          g.desc->name());
    }
    if (g.methods.empty()) {
      p.Print("    {0, \"\", \"\", false, false, false, nullptr, false},\n");
    }
    p.Print(
        vars,
        "};\n\n"
        "const ::google::protobuf::ServiceDescriptor* $name$Descriptor() {\n"
        "  return ::google::protobuf::DescriptorPool::generated_pool()"
        "->FindServiceByName(\"$full$\");\n"
        "}\n\n"
        "}  // namespace\n\n"
        "const ::granary::InterfaceInfo& $name$Ref::Interface() {\n"
        "  static const ::granary::InterfaceInfo info{\n"
        "      kTypeName, $reentrant$, $idle$, $placement$, k$name$Methods, "
        "$count$,\n"
        "      &$name$Descriptor, $stateless$, $max_workers$, $version$,\n"
        "      $fingerprint$ull, \"$filter$\"};\n"
        "  return info;\n"
        "}\n\n");
    for (const Method& m : g.methods) {
      std::map<std::string, std::string> mv{
          {"name", g.desc->name()},
          {"m", m.desc->name()},
          {"req", QualifiedClassName(m.desc->input_type())},
          {"rep", QualifiedClassName(m.desc->output_type())}};
      if (m.options.one_way()) {
        p.Print(mv,
                "void $name$Ref::$m$($req$ request) const {\n"
                "  ::granary::internal::Tell(invoker(), id(), k$m$, "
                "std::move(request));\n"
                "}\n\n");
      } else if (m.desc->server_streaming()) {
        p.Print(mv,
                "::granary::Stream<$rep$> $name$Ref::$m$($req$ request,\n"
                "    ::granary::CallOptions options) const {\n"
                "  return ::granary::internal::OpenStream<$req$, $rep$>(\n"
                "      invoker(), id(), k$m$, std::move(request), options);\n"
                "}\n\n");
      } else {
        p.Print(mv,
                "::granary::Task<$rep$> $name$Ref::$m$($req$ request,\n"
                "    ::granary::CallOptions options) const {\n"
                "  return ::granary::internal::Ask<$req$, $rep$>(\n"
                "      invoker(), id(), k$m$, std::move(request), "
                "std::move(options));\n"
                "}\n\n");
      }
    }
  }
  CloseNamespace(p, file);
}

void WriteGrainHeader(const pb::FileDescriptor* file,
                      const std::vector<Grain>& grains, pb::io::Printer& p) {
  p.Print(
      "// Generated by protoc-gen-granary from $file$. Do not edit.\n"
      "// Grain base classes: derive from them to implement the grains of "
      "this file.\n"
      "#pragma once\n\n"
      "#include \"$stem$.granary.h\"\n"
      "#include \"silo/runtime/grain.h\"\n\n",
      "file", file->name(), "stem", Stem(file));
  OpenNamespace(p, file);
  for (const Grain& g : grains) {
    p.Print(
        "// Implements $full$. Methods run as turns on one worker at a time;\n"
        "// they are coroutines and may co_await other grains.\n"
        "class $name$GrainBase : public ::granary::Grain {\n"
        " public:\n"
        "  using Ref = $name$Ref;\n"
        "  static const ::granary::GrainClassInfo& ClassInfo();\n\n",
        "name", g.desc->name(), "full", g.desc->full_name());
    for (const Method& m : g.methods) {
      if (m.desc->server_streaming()) {
        p.Print(
            "  // Server streaming: write to `stream` now or keep it (an "
            "ObserverSet)\n"
            "  // and write from later turns; the stream ends on "
            "Finish() or when\n"
            "  // the last copy of the writer is dropped.\n"
            "  virtual ::granary::Task<void> $m$(const $req$& request,\n"
            "      ::granary::StreamWriter<$e$> stream) = 0;\n",
            "m", m.desc->name(), "req",
            QualifiedClassName(m.desc->input_type()), "e",
            QualifiedClassName(m.desc->output_type()));
        continue;
      }
      p.Print(
          "  virtual ::granary::Task<$rep$> $m$(const $req$& request) = 0;\n",
          "rep", ReplyType(m), "m", m.desc->name(), "req",
          QualifiedClassName(m.desc->input_type()));
    }
    if (const pb::Descriptor* state = StateType(file, g.options)) {
      p.Print(
          "\n protected:\n"
          "  // The persistent state (GrainOptions.state): read before "
          "OnActivate,\n"
          "  // made durable by WriteState().\n"
          "  $name$GrainBase() { ::granary::Grain::PersistState(&state_); }\n"
          "  $type$& state() { return state_; }\n"
          "  const $type$& state() const { return state_; }\n\n"
          " private:\n"
          "  $type$ state_;\n",
          "name", g.desc->name(), "type", QualifiedClassName(state));
    }
    p.Print("};\n\n");
  }
  CloseNamespace(p, file);
}

void WriteGrainSource(const pb::FileDescriptor* file,
                      const std::vector<Grain>& grains, pb::io::Printer& p) {
  p.Print(
      "// Generated by protoc-gen-granary from $file$. Do not edit.\n"
      "#include \"$stem$.grain.h\"\n\n"
      "#include <memory>\n\n"
      "#include \"$stem$.grpc.pb.h\"\n"
      "#include \"silo/gateway/grpc_bridge.h\"\n\n",
      "file", file->name(), "stem", Stem(file));
  OpenNamespace(p, file);
  for (const Grain& g : grains) {
    p.Print("namespace {\n\n");
    // The named gRPC service: the stock plugin's raw callback methods, each
    // forwarding its bytes to the grain through the bridge.
    std::string base = absl::StrCat(g.desc->name(), "::Service");
    for (auto it = g.methods.rbegin(); it != g.methods.rend(); ++it) {
      base = absl::StrCat(g.desc->name(), "::WithRawCallbackMethod_",
                          it->desc->name(), "<", base, ">");
    }
    p.Print(
        "class $name$GrpcService final\n"
        "    : public $base$ {\n"
        " public:\n"
        "  explicit $name$GrpcService(::granary::CallInvoker* invoker)\n"
        "      : invoker_(invoker) {}\n",
        "name", g.desc->name(), "base", base);
    for (const Method& m : g.methods) {
      if (m.desc->server_streaming()) {
        p.Print(
            "  ::grpc::ServerWriteReactor<::grpc::ByteBuffer>* $m$(\n"
            "      ::grpc::CallbackServerContext* context,\n"
            "      const ::grpc::ByteBuffer* request) override {\n"
            "    return ::granary::silo::ServeServerStream(invoker_, context,\n"
            "        $name$Ref::Interface(), $name$Ref::k$m$, request);\n"
            "  }\n",
            "name", g.desc->name(), "m", m.desc->name());
        continue;
      }
      p.Print(
          "  ::grpc::ServerUnaryReactor* $m$(::grpc::CallbackServerContext* "
          "context,\n"
          "      const ::grpc::ByteBuffer* request, ::grpc::ByteBuffer* "
          "response) override {\n"
          "    return ::granary::silo::ServeUnary(invoker_, context, "
          "$name$Ref::Interface(),\n"
          "        $name$Ref::k$m$, request, response);\n"
          "  }\n",
          "name", g.desc->name(), "m", m.desc->name());
    }
    p.Print(
        "\n private:\n"
        "  ::granary::CallInvoker* invoker_;\n"
        "};\n\n"
        "std::unique_ptr<::grpc::Service> New$name$GrpcService(\n"
        "    ::granary::CallInvoker* invoker) {\n"
        "  return std::make_unique<$name$GrpcService>(invoker);\n"
        "}\n\n",
        "name", g.desc->name());
    for (const Method& m : g.methods) {
      if (m.desc->server_streaming()) {
        p.Print(
            "void Invoke$name$$m$(::granary::Grain* grain, "
            "::granary::CallBase* "
            "call) {\n"
            "  auto* typed = static_cast<::granary::Call<$req$, "
            "::google::protobuf::Empty>*>(call);\n"
            "  ::granary::internal::RunStreamRequest(\n"
            "      "
            "static_cast<$name$GrainBase*>(grain)->$m$(typed->typed_request(),"
            "\n"
            "          ::granary::internal::BeginStream<$rep$>(call)),\n"
            "      call);\n"
            "}\n\n",
            "name", g.desc->name(), "m", m.desc->name(), "req",
            QualifiedClassName(m.desc->input_type()), "rep",
            QualifiedClassName(m.desc->output_type()));
        continue;
      }
      p.Print(
          "void Invoke$name$$m$(::granary::Grain* grain, ::granary::CallBase* "
          "call) {\n"
          "  auto* typed = static_cast<::granary::Call<$req$, $rep$>*>(call);\n"
          "  ::granary::internal::RunRequest(\n"
          "      "
          "static_cast<$name$GrainBase*>(grain)->$m$(typed->typed_request()),"
          "\n      call);\n"
          "}\n\n",
          "name", g.desc->name(), "m", m.desc->name(), "req",
          QualifiedClassName(m.desc->input_type()), "rep",
          QualifiedClassName(m.desc->output_type()));
    }
    p.Print("const ::granary::InvokeFn k$name$Invokers[] = {\n", "name",
            g.desc->name());
    for (const Method& m : g.methods) {
      p.Print("    &Invoke$name$$m$,\n", "name", g.desc->name(), "m",
              m.desc->name());
    }
    if (g.methods.empty()) p.Print("    nullptr,\n");
    p.Print(
        "};\n\n"
        "}  // namespace\n\n"
        "const ::granary::GrainClassInfo& $name$GrainBase::ClassInfo() {\n"
        "  static const ::granary::GrainClassInfo info{\n"
        "      &$name$Ref::Interface(), k$name$Invokers, "
        "&New$name$GrpcService};\n"
        "  return info;\n"
        "}\n\n",
        "name", g.desc->name());
  }
  CloseNamespace(p, file);
}

template <typename Fn>
void Emit(pb::compiler::GeneratorContext* context, const std::string& name,
          Fn write) {
  std::unique_ptr<pb::io::ZeroCopyOutputStream> out(context->Open(name));
  pb::io::Printer printer(out.get(), '$');
  write(printer);
}

}  // namespace

bool GrainGenerator::Generate(const pb::FileDescriptor* file,
                              const std::string& parameter,
                              pb::compiler::GeneratorContext* context,
                              std::string* error) const {
  std::vector<Grain> grains;
  if (!Collect(file, &grains, error)) return false;
  const std::string stem = Stem(file);
  Emit(context, stem + ".granary.h",
       [&](pb::io::Printer& p) { WriteRefHeader(file, grains, p); });
  Emit(context, stem + ".granary.cc",
       [&](pb::io::Printer& p) { WriteRefSource(file, grains, p); });
  Emit(context, stem + ".grain.h",
       [&](pb::io::Printer& p) { WriteGrainHeader(file, grains, p); });
  Emit(context, stem + ".grain.cc",
       [&](pb::io::Printer& p) { WriteGrainSource(file, grains, p); });
  return true;
}

}  // namespace granary::codegen
