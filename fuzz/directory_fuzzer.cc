// Fuzzes the grain directory's request handling: DirectoryService
// (directory/directory_service.cc) called directly with parsed requests,
// over a DirectoryPartition of this process (directory/partition.h), the
// way gRPC hands it requests from other silos. No server, no socket: each
// handler finishes into gRPC's test reactor.
//
// Every input starts from the same partition: silo 10.0.0.1:1000@1 in a
// view of two Active silos, one ShuttingDown and one Dead, hosting the
// example grain types. The input is then a list of operations, each
//   byte     op: 0 Register, 1 Lookup, 2 Unregister (DirectoryRequest),
//            3 Rebuild (RebuildRequest; ring 0 stands for the current
//            ring), 4 a new view (MembershipView), 5 the clock moves on
//            (first payload byte, in seconds)
//   U16      payload length (little-endian), then the payload
// Payloads that do not parse are skipped (gRPC would not deliver them).
// Checked: every handler finishes at once, and a registration that
// succeeded is found by a lookup right after it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/clock.h"
#include "directory/directory_service.h"
#include "directory/partition.h"
#include "fuzz/fuzz_support.h"
#include "google/protobuf/util/message_differencer.h"
#include "granary/v1/cluster.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/test/default_reactor_test_peer.h"

namespace granary::fuzz {
namespace {

constexpr char kSelf[] = "10.0.0.1:1000@1";
constexpr int kMaxOps = 64;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "directory: %s\n", what.c_str());
  std::abort();
}

v1::Member Row(const char* address, v1::MemberStatus status) {
  v1::Member m;
  m.set_address(address);
  m.set_generation(1);
  m.set_status(status);
  for (const char* type :
       {"granary.examples.Counter", "granary.examples.Ping",
        "granary.examples.BankAccount", "granary.examples.Alarm"}) {
    m.add_grain_types(type);
  }
  return m;
}

v1::MembershipView BaseView() {
  v1::MembershipView view;
  view.set_version(1);
  *view.add_members() = Row("10.0.0.1:1000", v1::MEMBER_ACTIVE);
  *view.add_members() = Row("10.0.0.2:1000", v1::MEMBER_ACTIVE);
  *view.add_members() = Row("10.0.0.3:1000", v1::MEMBER_SHUTTING_DOWN);
  *view.add_members() = Row("10.0.0.4:1000", v1::MEMBER_DEAD);
  return view;
}

// As SiloHost checks types: the example types are hosted, an empty name
// is not known yet, anything else is refused before it is interned.
absl::Status CheckType(absl::string_view type) {
  if (type == "granary.examples.Counter" || type == "granary.examples.Ping" ||
      type == "granary.examples.BankAccount" ||
      type == "granary.examples.Alarm") {
    return absl::OkStatus();
  }
  if (type.empty()) return absl::UnavailableError("no view yet");
  return absl::PermissionDeniedError("no live silo hosts this type");
}

// Runs one unary handler on a fresh server context and returns its status;
// the handler must finish before it returns.
template <typename Handler>
grpc::Status Call(Handler handler) {
  grpc::CallbackServerContext context;
  grpc::testing::DefaultReactorTestPeer peer(&context);
  handler(&context);
  if (!peer.test_status_set()) Fail("a handler returned without finishing");
  return peer.test_status();
}

void Run(const uint8_t* data, size_t size) {
  FakeClock clock;
  directory::DirectoryPartition partition(kSelf, &clock);
  partition.set_dead_grace(absl::Seconds(30));
  partition.OnView(BaseView());
  directory::DirectoryService service(&partition, &CheckType);

  InputReader in(data, size);
  for (int ops = 0; ops < kMaxOps && !in.empty(); ++ops) {
    const uint8_t op = in.Byte() % 6;
    const std::string payload(in.Bytes(in.U16()));
    if (op <= 2) {
      v1::DirectoryRequest request;
      if (!request.ParseFromString(payload)) continue;
      v1::DirectoryReply reply;
      const grpc::Status status = Call([&](grpc::CallbackServerContext* c) {
        if (op == 0) service.Register(c, &request, &reply);
        if (op == 1) service.Lookup(c, &request, &reply);
        if (op == 2) service.Unregister(c, &request, &reply);
      });
      if (op == 0 && status.ok()) {
        v1::DirectoryRequest lookup;
        *lookup.mutable_entry() = request.entry();
        lookup.set_view_version(request.view_version());
        v1::DirectoryReply found;
        const grpc::Status again = Call([&](grpc::CallbackServerContext* c) {
          service.Lookup(c, &lookup, &found);
        });
        if (!again.ok() || !found.found() ||
            !google::protobuf::util::MessageDifferencer::Equals(
                found.entry(), reply.entry())) {
          Fail(absl::StrCat("registered ", reply.entry().ShortDebugString(),
                            " but a lookup right after answered ",
                            again.error_code(), " ", found.ShortDebugString()));
        }
      }
    } else if (op == 3) {
      v1::RebuildRequest request;
      if (!request.ParseFromString(payload)) continue;
      if (request.ring() == 0) request.set_ring(partition.ring_fingerprint());
      v1::RebuildReply reply;
      Call([&](grpc::CallbackServerContext* c) {
        service.Rebuild(c, &request, &reply);
      });
    } else if (op == 4) {
      v1::MembershipView view;
      if (!view.ParseFromString(payload)) continue;
      partition.OnView(view);
    } else {
      clock.Advance(absl::Seconds(payload.empty() ? 1 : payload[0] & 0xff));
    }
  }
}

}  // namespace
}  // namespace granary::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  granary::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > granary::fuzz::kMaxInputBytes) return -1;
  granary::fuzz::Run(data, size);
  return 0;
}
