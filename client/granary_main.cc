// granary: the command-line tool. Calls any grain of a running silo with a
// JSON request, lists what the silo hosts, and manages the PostgreSQL
// schema of production clusters (`granary db migrate`).
//
//   granary --gateway=127.0.0.1:30000 call Counter/alice Add '{"amount": 5}'
//   {"value":"5"}
//   granary types
//   granary status
//
// It learns message types from the silo (gRPC server reflection) and grain
// types from `granary.v1.Gateway/Status`, so it calls grain types it was
// never built with. Replies go to stdout as JSON; errors go to stderr as
// "granary: CODE: message" with exit status 1 (2 for usage errors).
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/json_request.h"
#include "client/proto_check.h"
#include "client/security_flags.h"
#include "client/server_reflection.grpc.pb.h"
#include "core/flags_usage.h"
#include "core/grain_id.h"
#include "core/member.h"
#include "core/request_context.h"
#include "core/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/descriptor_database.h"
#include "granary/v1/gateway.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "rpc/credentials.h"
#include "rpc/limits.h"
#include "rpc/status.h"
#include "storage/postgres/pg_connection.h"
#include "storage/postgres/schema.h"

ABSL_FLAG(std::string, gateway, "127.0.0.1:30000",
          "Gateway of the silo to talk to (HOST:PORT).");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(10),
          "Deadline of each request to the silo (and of the database "
          "connection for `db`).");
ABSL_FLAG(std::vector<std::string>, context, {},
          "For `call`: request context entries KEY=VALUE, comma-separated "
          "(sent as gRPC metadata granary-ctx-KEY; grain code reads them "
          "with granary::GetContext).");
ABSL_FLAG(std::string, traceparent, "",
          "For `call`: a W3C traceparent header the call continues "
          "(default: the silo starts a new trace).");
ABSL_FLAG(absl::Duration, watch_for, absl::InfiniteDuration(),
          "For `call` of a server-streaming method: how long to print its "
          "messages before ending the call (default: until the grain ends "
          "the stream; Ctrl-C ends it too).");
ABSL_FLAG(std::string, postgres, "",
          "For `db`: the PostgreSQL connection string or URI (it may hold a "
          "password: prefer --postgres_file or GRANARY_POSTGRES).");
ABSL_FLAG(std::string, postgres_file, "",
          "For `db`: a file holding the PostgreSQL connection string.");
ABSL_FLAG(bool, allow_insecure_postgres, false,
          "For `db`: allow a PostgreSQL server that is not on this machine "
          "without sslmode=verify-full in the connection string.");

namespace granary::cli {
namespace {

namespace pb = google::protobuf;
using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;

constexpr char kUsage[] =
    "granary [--gateway=HOST:PORT] [--timeout=DURATION]\n"
    "        [--tls_ca=FILE [--tls_cert=FILE --tls_key=FILE]] "
    "[--token_file=FILE] COMMAND\n"
    "\n"
    "Commands:\n"
    "  call TYPE/KEY METHOD [JSON]  call a grain; prints the reply as JSON\n"
    "                               (TYPE may be the short name, e.g. "
    "Counter);\n"
    "                               --context=K=V,K2=V2 sets request "
    "context,\n"
    "                               --traceparent=00-... continues a trace\n"
    "  types                        list grain types and their methods\n"
    "  status                       the silo's identity, uptime and "
    "activations\n"
    "  cluster                      the cluster's membership table: silo, "
    "generation,\n"
    "                               status, gateway, activations, the grain\n"
    "                               types each hosts (version, fingerprint)\n"
    "                               and its labels\n"
    "  db migrate                   create or upgrade the PostgreSQL schema "
    "of\n"
    "                               --cluster=postgres (idempotent); needs\n"
    "                               --postgres, --postgres_file or "
    "GRANARY_POSTGRES\n"
    "  db version                   the database's schema version and this "
    "build's\n"
    "  proto check --against=DIR|REV FILE.proto...  breaking changes of "
    "grain\n                               interfaces (proto check --help)\n";

// Prints each message of a server-streaming call as one JSON line, as it
// arrives. The request goes out on a generic bidi call and is half-closed
// at once: on the wire that is the server-streaming call.
class PrintingStream final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PrintingStream(const pb::Descriptor* output, std::ostream* out)
      : output_(output), out_(out) {}

  void Run(grpc::GenericStub* stub, grpc::ClientContext* ctx,
           const std::string& path, const grpc::ByteBuffer& request) {
    request_ = request;
    stub->PrepareBidiStreamingCall(ctx, path, grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&received_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (received_.Dump(&slices).ok()) {
      for (const auto& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    absl::StatusOr<std::string> json = ReplyToJson(*output_, bytes);
    if (json.ok()) {
      *out_ << *json << std::endl;  // flushed: a watcher sees it now
    } else {
      std::cerr << "granary: " << json.status() << "\n";
    }
    StartRead(&received_);
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    done_ = true;
    cv_.notify_one();
  }
  grpc::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return status_;
  }

 private:
  const pb::Descriptor* const output_;
  std::ostream* const out_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer received_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status status_;
};

class Cli {
 public:
  Cli(std::string gateway, absl::Duration timeout, rpc::ClientSecurity security)
      : gateway_(std::move(gateway)),
        timeout_(timeout),
        watch_for_(absl::GetFlag(FLAGS_watch_for)),
        security_(std::move(security)),
        channel_(rpc::NewChannel(gateway_,
                                 rpc::MakeChannelCredentials(security_))) {}

  absl::StatusOr<v1::SiloStatus> Status() {
    auto stub = v1::Gateway::NewStub(channel_);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::SiloStatus status;
    GRANARY_RETURN_IF_ERROR(
        rpc::FromGrpc(stub->Status(&ctx, v1::StatusRequest(), &status),
                      absl::StrCat("silo at ", gateway_)));
    return status;
  }

  absl::Status PrintStatus() {
    GRANARY_ASSIGN_OR_RETURN(v1::SiloStatus s, Status());
    std::cout << "silo         " << s.name() << "\n"
              << "gateway      " << s.gateway() << "\n"
              << "version      " << s.version() << "\n"
              << "started      "
              << absl::FormatTime(absl::RFC3339_sec,
                                  absl::FromUnixMillis(s.start_time_unix_ms()),
                                  absl::UTCTimeZone())
              << "\n"
              << "uptime       "
              << absl::FormatDuration(absl::Seconds(s.uptime_ms() / 1000))
              << "\n"
              << "activations  " << s.activations() << " (activated "
              << s.activated_total() << ", deactivated "
              << s.deactivated_total() << " since start)\n"
              << "grain types  " << s.grain_types_size() << "\n";
    return absl::OkStatus();
  }

  absl::Status PrintCluster() {
    auto stub = v1::Gateway::NewStub(channel_);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::MembershipView view;
    GRANARY_RETURN_IF_ERROR(
        rpc::FromGrpc(stub->Cluster(&ctx, v1::ClusterRequest(), &view),
                      absl::StrCat("silo at ", gateway_)));
    std::vector<v1::Member> members(view.members().begin(),
                                    view.members().end());
    std::sort(members.begin(), members.end(),
              [](const v1::Member& a, const v1::Member& b) {
                return std::make_tuple(a.address(), a.generation()) <
                       std::make_tuple(b.address(), b.generation());
              });
    std::cout << absl::StrFormat("%-24s %-14s %-14s %-22s %11s %s\n", "SILO",
                                 "GENERATION", "STATUS", "GATEWAY",
                                 "ACTIVATIONS", "SUSPICIONS");
    for (const v1::Member& m : members) {
      std::string status = v1::MemberStatus_Name(m.status());
      if (absl::StartsWith(status, "MEMBER_")) status = status.substr(7);
      std::cout << absl::StrFormat("%-24s %-14d %-14s %-22s %11d %d\n",
                                   m.address(), m.generation(),
                                   absl::AsciiStrToLower(status), m.gateway(),
                                   m.activations(), m.suspicions_size());
      // What it hosts (interface versions, fingerprints), labels and load.
      for (const auto& [name, text] :
           {std::pair{"hosts   ", HostedTypesText(m, true)},
            std::pair{"labels  ", LabelsText(m)},
            std::pair{"load    ", LoadText(m)}}) {
        if (!text.empty()) std::cout << "    " << name << text << "\n";
      }
    }
    std::cout << "version " << view.version() << "\n";
    return absl::OkStatus();
  }

  absl::Status PrintTypes() {
    GRANARY_ASSIGN_OR_RETURN(v1::SiloStatus s, Status());
    for (const v1::GrainTypeDescription& type : s.grain_types()) {
      std::cout << type.name() << (type.reentrant() ? "  [reentrant]" : "")
                << "\n";
      for (const v1::MethodDescription& m : type.methods()) {
        std::vector<std::string> flags;
        if (m.one_way()) flags.push_back("one_way");
        if (m.read_only()) flags.push_back("read_only");
        if (m.always_interleave()) flags.push_back("always_interleave");
        std::cout << "  " << m.name() << "(" << m.input_type() << ") returns ("
                  << (m.server_streaming() ? "stream " : "") << m.output_type()
                  << ")";
        if (!flags.empty())
          std::cout << "  [" << absl::StrJoin(flags, ", ") << "]";
        std::cout << "\n";
      }
    }
    return absl::OkStatus();
  }

  absl::Status Call(const std::string& target, const std::string& method_name,
                    const std::string& json) {
    const size_t slash = target.find('/');
    if (slash == std::string::npos || slash == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", target, "' is not TYPE/KEY (for example Counter/alice)"));
    }
    const std::string type_name = target.substr(0, slash);
    const std::string key = target.substr(slash + 1);
    GRANARY_RETURN_IF_ERROR(ValidateGrainKey(key));

    GRANARY_ASSIGN_OR_RETURN(v1::SiloStatus silo, Status());
    GRANARY_ASSIGN_OR_RETURN(const v1::GrainTypeDescription* type,
                             ResolveType(silo, type_name));
    const v1::MethodDescription* method = nullptr;
    for (const auto& m : type->methods()) {
      if (m.name() == method_name) method = &m;
    }
    if (method == nullptr) {
      std::vector<std::string> names;
      for (const auto& m : type->methods()) names.push_back(m.name());
      return absl::UnimplementedError(absl::StrCat(
          "grain type ", type->name(), " has no method '", method_name,
          "' (it has ", absl::StrJoin(names, ", "), ")"));
    }

    GRANARY_RETURN_IF_ERROR(LoadSymbol(type->name()));
    const pb::Descriptor* input =
        pool_.FindMessageTypeByName(method->input_type());
    const pb::Descriptor* output =
        pool_.FindMessageTypeByName(method->output_type());
    if (input == nullptr || output == nullptr) {
      return absl::InternalError(
          absl::StrCat("the silo's reflection does not describe ",
                       method->input_type(), " or ", method->output_type()));
    }
    GRANARY_ASSIGN_OR_RETURN(std::string bytes, RequestFromJson(*input, json));
    grpc::GenericStub stub(channel_);
    grpc::ClientContext ctx;
    if (method->server_streaming()) {
      // A stream runs until the grain ends it: a deadline only when asked.
      if (watch_for_ != absl::InfiniteDuration()) {
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + watch_for_));
      }
      rpc::AddCallToken(&ctx, security_);
    } else {
      SetDeadline(&ctx);
    }
    ctx.AddMetadata("granary-key", key);
    for (const auto& [k, v] : context_) {
      ctx.AddMetadata(absl::StrCat("granary-ctx-", k), v);
    }
    if (!traceparent_.empty()) ctx.AddMetadata("traceparent", traceparent_);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer send(&slice, 1);
    const std::string path =
        absl::StrCat("/", type->name(), "/", method->name());
    if (method->server_streaming()) {
      // Each message is printed as it arrives, one JSON line each.
      PrintingStream printer(output, &std::cout);
      printer.Run(&stub, &ctx, path, send);
      grpc::Status ended = printer.Wait();
      // --watch_for ran out: the watch is over, as asked.
      if (ended.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
          watch_for_ != absl::InfiniteDuration()) {
        return absl::OkStatus();
      }
      return rpc::FromGrpc(
          ended, absl::StrCat(type->name(), "/", key, " ", method->name()));
    }
    grpc::ByteBuffer received;
    grpc::Status status;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    stub.UnaryCall(&ctx, path, grpc::StubOptions(), &send, &received,
                   [&](grpc::Status s) {
                     std::lock_guard<std::mutex> lock(mu);
                     status = std::move(s);
                     done = true;
                     cv.notify_one();
                   });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done; });
    }
    GRANARY_RETURN_IF_ERROR(rpc::FromGrpc(
        status, absl::StrCat(type->name(), "/", key, " ", method->name())));
    std::vector<grpc::Slice> slices;
    std::string reply_bytes;
    if (received.Dump(&slices).ok()) {
      for (const auto& s : slices) {
        reply_bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    GRANARY_ASSIGN_OR_RETURN(std::string out,
                             ReplyToJson(*output, reply_bytes));
    std::cout << out << "\n";
    return absl::OkStatus();
  }

  // Request context entries and traceparent sent with `call`.
  void SetCallContext(ContextMap context, std::string traceparent) {
    context_ = std::move(context);
    traceparent_ = std::move(traceparent);
  }

 private:
  // The deadline and the bearer token of every request.
  void SetDeadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
    rpc::AddCallToken(ctx, security_);
  }

  // `name` is the full type name or an unambiguous last component.
  static absl::StatusOr<const v1::GrainTypeDescription*> ResolveType(
      const v1::SiloStatus& silo, const std::string& name) {
    std::vector<const v1::GrainTypeDescription*> matches;
    for (const auto& t : silo.grain_types()) {
      if (t.name() == name) return &t;
      if (absl::EndsWith(t.name(), absl::StrCat(".", name))) {
        matches.push_back(&t);
      }
    }
    if (matches.size() == 1) return matches[0];
    std::vector<std::string> names;
    for (const auto& t : silo.grain_types()) names.push_back(t.name());
    if (matches.size() > 1) {
      std::vector<std::string> ambiguous;
      for (const auto* m : matches) ambiguous.push_back(m->name());
      return absl::InvalidArgumentError(
          absl::StrCat("grain type '", name,
                       "' is ambiguous: ", absl::StrJoin(ambiguous, ", ")));
    }
    return absl::UnimplementedError(
        absl::StrCat("unknown grain type '", name, "'; silo ", silo.name(),
                     " hosts ", absl::StrJoin(names, ", ")));
  }

  // Fetches (by reflection) the file defining `symbol` and everything it
  // imports into pool_.
  absl::Status LoadSymbol(const std::string& symbol) {
    auto stub = ServerReflection::NewStub(channel_);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    auto stream = stub->ServerReflectionInfo(&ctx);
    std::vector<std::string> wanted;
    ServerReflectionRequest request;
    request.set_file_containing_symbol(symbol);
    while (true) {
      if (!stream->Write(request)) break;
      ServerReflectionResponse response;
      if (!stream->Read(&response)) break;
      if (response.has_error_response()) {
        stream->WritesDone();
        (void)stream->Finish();
        return absl::Status(
            static_cast<absl::StatusCode>(
                response.error_response().error_code()),
            absl::StrCat("reflection: ",
                         response.error_response().error_message()));
      }
      for (const std::string& bytes :
           response.file_descriptor_response().file_descriptor_proto()) {
        pb::FileDescriptorProto file;
        if (!file.ParseFromString(bytes)) {
          return absl::InternalError("reflection sent a bad file descriptor");
        }
        if (!loaded_.insert(file.name()).second) continue;
        for (const std::string& dep : file.dependency()) wanted.push_back(dep);
        database_.Add(file);
      }
      // Ask for imports the server did not send along.
      request.Clear();
      while (!wanted.empty() && loaded_.count(wanted.back()) > 0) {
        wanted.pop_back();
      }
      if (wanted.empty()) break;
      request.set_file_by_filename(wanted.back());
      wanted.pop_back();
    }
    stream->WritesDone();
    grpc::Status finished = stream->Finish();
    return rpc::FromGrpc(finished, "reflection");
  }

  const std::string gateway_;
  const absl::Duration timeout_;
  const absl::Duration watch_for_;  // the deadline of a streaming call
  const rpc::ClientSecurity security_;
  std::shared_ptr<grpc::Channel> channel_;
  std::set<std::string> loaded_;
  pb::SimpleDescriptorDatabase database_;
  ContextMap context_;
  std::string traceparent_;
  pb::DescriptorPool pool_{&database_};
};

int Fail(const absl::Status& status) {
  std::cerr << "granary: " << absl::StatusCodeToString(status.code()) << ": "
            << status.message() << "\n";
  return 1;
}

int Usage(const std::string& problem) {
  std::cerr << "granary: " << problem << "\n\n" << kUsage;
  return 2;
}

// `granary db migrate|version`: exit 2 for usage errors and a bad
// connection string, 1 when the database refuses or cannot be reached.
int Database(const std::string& what) {
  if (what != "migrate" && what != "version") {
    return Usage(absl::StrCat("unknown db command '", what, "'"));
  }
  absl::StatusOr<std::string> conninfo = storage::ResolveConninfo(
      absl::GetFlag(FLAGS_postgres), absl::GetFlag(FLAGS_postgres_file));
  if (!conninfo.ok()) return Usage(std::string(conninfo.status().message()));
  if (absl::Status s = storage::CheckConninfoTransport(
          *conninfo, absl::GetFlag(FLAGS_allow_insecure_postgres));
      !s.ok()) {
    return Usage(std::string(s.message()));
  }
  absl::StatusOr<std::unique_ptr<storage::PgConnection>> db =
      storage::PgConnection::Connect(*conninfo, absl::GetFlag(FLAGS_timeout));
  if (!db.ok()) return Fail(db.status());
  if (what == "version") {
    absl::StatusOr<int> version = storage::SchemaVersion(**db);
    if (!version.ok()) return Fail(version.status());
    std::cout << "schema " << *version
              << " (this build: " << storage::LatestSchemaVersion() << ")\n";
    return 0;
  }
  absl::StatusOr<std::vector<int>> applied = storage::MigrateSchema(**db);
  if (!applied.ok()) return Fail(applied.status());
  if (applied->empty()) {
    std::cout << "schema " << storage::LatestSchemaVersion()
              << " is up to date (" << storage::RedactConninfo(*conninfo)
              << ")\n";
  } else {
    std::cout << "schema migrated to " << storage::LatestSchemaVersion()
              << " (applied " << absl::StrJoin(*applied, ", ") << "; "
              << storage::RedactConninfo(*conninfo) << ")\n";
  }
  return 0;
}

// --context's KEY=VALUE items, validated as a silo would.
absl::StatusOr<ContextMap> ParseContextFlag(
    const std::vector<std::string>& items) {
  ContextMap entries;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--context item '", item, "' is not KEY=VALUE"));
    }
    entries.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  GRANARY_ASSIGN_OR_RETURN(std::shared_ptr<const ContextMap> values,
                           MakeContextValues(std::move(entries)));
  return values != nullptr ? *values : ContextMap{};
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  UseGranaryFlagsUsage();
  if (std::optional<int> code = RunIfProtoCommand(argc, argv)) return *code;
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) return Usage("no command given");
  const std::string command = args[1];
  absl::StatusOr<rpc::ClientSecurity> security =
      client::ClientSecurityFromFlags();
  if (!security.ok()) return Usage(std::string(security.status().message()));
  if (absl::GetFlag(FLAGS_watch_for) <= absl::ZeroDuration()) {
    return Usage("--watch_for must be positive");
  }
  if (command != "db") {
    if (absl::Status s =
            rpc::CheckTokenTransport(*security, absl::GetFlag(FLAGS_gateway));
        !s.ok()) {
      return Usage(std::string(s.message()));
    }
  }
  Cli cli(absl::GetFlag(FLAGS_gateway), absl::GetFlag(FLAGS_timeout),
          *std::move(security));
  absl::Status status;
  if (command == "call") {
    if (args.size() < 4 || args.size() > 5) {
      return Usage("call takes TYPE/KEY METHOD [JSON]");
    }
    absl::StatusOr<ContextMap> context =
        ParseContextFlag(absl::GetFlag(FLAGS_context));
    if (!context.ok()) return Usage(std::string(context.status().message()));
    const std::string traceparent = absl::GetFlag(FLAGS_traceparent);
    if (!traceparent.empty() && !TraceContext::Parse(traceparent)) {
      return Usage(absl::StrCat("--traceparent '", traceparent,
                                "' is not a W3C traceparent "
                                "(00-<32 hex>-<16 hex>-<2 hex>)"));
    }
    cli.SetCallContext(*std::move(context), traceparent);
    status = cli.Call(args[2], args[3], args.size() == 5 ? args[4] : "{}");
  } else if (command == "types") {
    if (args.size() != 2) return Usage("types takes no arguments");
    status = cli.PrintTypes();
  } else if (command == "status") {
    if (args.size() != 2) return Usage("status takes no arguments");
    status = cli.PrintStatus();
  } else if (command == "cluster") {
    if (args.size() != 2) return Usage("cluster takes no arguments");
    status = cli.PrintCluster();
  } else if (command == "db") {
    if (args.size() != 3) return Usage("db takes migrate or version");
    return Database(args[2]);
  } else {
    return Usage(absl::StrCat("unknown command '", command, "'"));
  }
  return status.ok() ? 0 : Fail(status);
}

}  // namespace
}  // namespace granary::cli

int main(int argc, char** argv) { return granary::cli::Main(argc, argv); }
