// Fuzzes the gateway protocol: the input is the bytes of one message on a
// `granary.v1.Gateway/Connect` stream. GatewayService's stream reactor
// (silo/gateway/gateway_service.cc) decodes it as a RequestBatch and routes
// each request (by gRPC path, key, payload, id, timeout; id 0 as clients
// send one-way calls; hops, chain id, caller and reminder ticks on the
// silo-endpoint instance) into a silo hosting the example grains, then
// batches the replies back.
//
// The service runs in a gRPC server of this process listening on
// 127.0.0.1 port 0, reached over one channel made at start: each input is
// a new stream on that connection, no socket is opened per input. (gRPC
// 1.51's in-process channel would do without a port, but now and then it
// keeps both calls of a stream that the server ends before reading the
// client's half-close: undecodable batches would pile up.) Each input goes
// to the client-facing instance and to the silo-endpoint instance; the
// client half-closes, and the stream ends once every accepted call was
// answered. Checked per stream, when it ended within the bound:
//   - the gateway decoded the batch exactly when protobuf does;
//   - each request with an id (not 0) got exactly one reply, unless its
//     method is one-way: then one when it was refused, else none;
//   - requests with id 0 got at most one reply each (id 0, for an awaited
//     method that ran), and no reply names an id no request had;
//   - stream items (Reply.item) name only ids of server-streaming requests
//     and are not counted as their replies. Watches never end by
//     themselves: a second batch cancels them (RequestBatch.cancels), so
//     each gets one reply and the stream can finish.
// And per request of a batch that decodes, on its trace fields directly
// (core/request_context.h), since a reply does not show the trace:
//   - `trace` decodes exactly when it is 25 bytes with a trace id and a span
//     id not all zero, and then encodes back to the same bytes;
//   - the call's trace (ContinueWireTrace) is always valid: the sent trace
//     id when `trace` decodes (or, with `trace` empty, `traceparent`
//     parses), else a new one.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/grain_interface.h"
#include "core/opaque_call.h"
#include "core/request_context.h"
#include "fuzz/fuzz_support.h"
#include "granary/v1/gateway.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/sync_stream.h"
#include "rpc/callback_queue.h"
#include "silo/gateway/gateway_call.h"
#include "silo/gateway/gateway_service.h"
#include "silo/runtime/grain.h"
#include "silo/runtime/runtime.h"

namespace granary::fuzz {
namespace {

constexpr char kConnect[] = "/granary.v1.Gateway/Connect";
// How long one stream may take to answer everything, and then to be gone
// on the server's side. Each input goes to both gateways: together well
// under the fuzzer's -timeout.
constexpr absl::Duration kReplyBound = absl::Seconds(3);
constexpr absl::Duration kCloseBound = absl::Seconds(1);

using RawStream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

// The gRPC paths of the one-way methods of the silo's grain types.
absl::flat_hash_set<std::string>* one_way_methods = nullptr;
// The gRPC paths of the server-streaming methods.
absl::flat_hash_set<std::string>* streaming_methods = nullptr;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "gateway_batch: %s\n", what.c_str());
  std::abort();
}

// One GatewayService in a server of its own, and a channel to it.
struct Gateway {
  std::unique_ptr<silo::GatewayService> service;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  const char* name;
};

Gateway* StartGateway(silo::Runtime* silo, bool from_silos) {
  auto* g = new Gateway;  // lives for the process
  g->name = from_silos ? "silo endpoint" : "client gateway";
  silo::GatewayServiceOptions options;
  options.from_silos = from_silos;
  options.address = "127.0.0.1:1";
  g->service = std::make_unique<silo::GatewayService>(silo, options);
  grpc::ServerBuilder builder;
  builder.RegisterService(g->service->grpc_service());
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  g->server = builder.BuildAndStart();
  if (g->server == nullptr || port == 0) Fail("the gateway did not start");
  g->channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials());
  if (!g->channel->WaitForConnected(
          absl::ToChronoTime(absl::Now() + absl::Seconds(10)))) {
    Fail("the channel to the gateway did not connect");
  }
  return g;
}

// Sends `bytes` as one message and reads every reply batch until the
// server ends the stream. `batch` is the input decoded by protobuf, or null
// when it does not decode.
void Exchange(const Gateway& g, const std::string& bytes,
              const v1::RequestBatch* batch) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kReplyBound));
  std::unique_ptr<RawStream> stream(
      grpc::internal::
          ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
              g.channel.get(),
              grpc::internal::RpcMethod(
                  kConnect, grpc::internal::RpcMethod::BIDI_STREAMING),
              &context));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer message(&slice, 1);
  stream->Write(message);
  if (batch != nullptr) {
    v1::RequestBatch cancels;
    for (const v1::Request& r : batch->requests()) {
      if (r.id() != 0 && streaming_methods->contains(r.method())) {
        cancels.add_cancels(r.id());
      }
    }
    if (cancels.cancels_size() > 0) {
      grpc::Slice cancel_slice(cancels.SerializeAsString());
      grpc::ByteBuffer cancel_message(&cancel_slice, 1);
      stream->Write(cancel_message);
    }
  }
  stream->WritesDone();

  absl::flat_hash_map<uint64_t, int> replies;
  absl::flat_hash_set<uint64_t> items;
  grpc::ByteBuffer incoming;
  while (stream->Read(&incoming)) {
    grpc::ProtoBufferReader reader(&incoming);
    v1::ReplyBatch out;
    if (!out.ParseFromZeroCopyStream(&reader)) {
      Fail(absl::StrCat(g.name, ": a reply batch does not decode"));
    }
    for (const v1::Reply& r : out.replies()) {
      if (r.item()) {
        items.insert(r.id());
      } else {
        ++replies[r.id()];
      }
    }
  }
  const grpc::Status status = stream->Finish();
  // The server's side of the stream goes too (so what the input allocated
  // is freed before the next one starts).
  (void)g.service->WaitForStreamsClosed(kCloseBound);
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return;  // calls still running: nothing to compare yet
  }
  if (batch == nullptr) {
    if (status.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
      Fail(absl::StrCat(g.name, ": an undecodable batch ended its stream with ",
                        status.error_code(), " ", status.error_message()));
    }
    return;
  }
  if (!status.ok()) {
    Fail(absl::StrCat(g.name, ": stream of a valid batch ended with ",
                      status.error_code(), " ", status.error_message()));
  }
  // Per id: the replies that must come, and how many more may.
  absl::flat_hash_map<uint64_t, std::pair<int, int>> expected;
  for (const v1::Request& r : batch->requests()) {
    auto& [must, may] = expected[r.id()];
    if (r.id() == 0 || one_way_methods->contains(r.method())) {
      ++may;
    } else {
      ++must;
    }
  }
  for (uint64_t id : items) {
    bool streaming = false;
    for (const v1::Request& r : batch->requests()) {
      if (r.id() == id && streaming_methods->contains(r.method())) {
        streaming = true;
      }
    }
    if (!streaming) {
      Fail(absl::StrCat(g.name, ": a stream item for id ", id,
                        ", which no streaming request had"));
    }
  }
  for (const auto& [id, n] : replies) {
    if (!expected.contains(id)) {
      Fail(absl::StrCat(g.name, ": a reply to id ", id,
                        ", which no request had"));
    }
  }
  for (const auto& [id, range] : expected) {
    auto it = replies.find(id);
    const int got = it == replies.end() ? 0 : it->second;
    if (got < range.first || got > range.first + range.second) {
      Fail(absl::StrCat(g.name, ": requests with id ", id, " got ", got,
                        " replies, not ", range.first, " to ",
                        range.first + range.second));
    }
  }
}

// What a silo of a cluster does with a request whose type or method it
// does not know (silo/gateway/gateway_call.h, OpaqueRoute; the silo here is
// alone, so its gateway refuses those before reaching it): the method path
// splits into a type and a method that make it up again, and a payload that
// parses as an opaque request writes back bytes that parse to the same.
void CheckOpaque(const v1::Request& r) {
  absl::string_view type, method;
  if (silo::SplitMethodPath(r.method(), &type, &method)) {
    if (type.empty() || method.empty() || method.front() == '$' ||
        absl::StrCat("/", type, "/", method) != r.method()) {
      std::fprintf(stderr, "method path split wrongly\n");
      std::abort();
    }
  }
  auto* call = new OpaqueCall(GrainId("fuzz.Opaque", "k"), r.method(), false);
  if (call->ParseRequest(r.payload())) {
    const std::string once = call->request().SerializeAsString();
    auto* again =
        new OpaqueCall(GrainId("fuzz.Opaque", "k"), r.method(), false);
    if (!again->ParseRequest(once) ||
        again->request().SerializeAsString() != once) {
      std::fprintf(stderr, "an opaque request did not write back\n");
      std::abort();
    }
    again->Release();
  }
  call->Release();
}

// The properties of `r`'s trace fields listed at the top.
void CheckTrace(const v1::Request& r) {
  const std::string& bytes = r.trace();
  auto all_zero = [&bytes](size_t from, size_t n) {
    return std::all_of(bytes.begin() + from, bytes.begin() + from + n,
                       [](char c) { return c == 0; });
  };
  const bool well_formed =
      bytes.size() == kTraceBinaryBytes && !all_zero(0, 16) && !all_zero(16, 8);
  const std::optional<TraceContext> binary = TraceContext::FromBinary(bytes);
  if (binary.has_value() != well_formed) {
    Fail(absl::StrCat("a binary trace of ", bytes.size(), " bytes ",
                      well_formed ? "did not decode" : "decoded"));
  }
  if (binary.has_value() && binary->ToBinary() != bytes) {
    Fail("a binary trace does not encode back to the same bytes");
  }
  const std::optional<TraceContext> sent =
      bytes.empty() ? TraceContext::Parse(r.traceparent()) : binary;
  const TraceContext continued = ContinueWireTrace(bytes, r.traceparent());
  if (!continued.valid()) Fail("a request's trace continued invalid");
  if (sent.has_value() && (continued.trace_hi != sent->trace_hi ||
                           continued.trace_lo != sent->trace_lo ||
                           continued.flags != sent->flags)) {
    Fail("a request's trace was not continued under its trace id");
  }
}

Gateway* client_gateway = nullptr;
Gateway* silo_gateway = nullptr;

}  // namespace
}  // namespace granary::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace granary::fuzz;
  QuietLogs();
  granary::rpc::HoldGrpcCallbackQueue();
  granary::silo::Runtime* silo = &ExampleSilo();
  client_gateway = StartGateway(silo, /*from_silos=*/false);
  silo_gateway = StartGateway(silo, /*from_silos=*/true);
  one_way_methods = new absl::flat_hash_set<std::string>;
  streaming_methods = new absl::flat_hash_set<std::string>;
  for (const granary::GrainClassInfo* info : silo->GrainTypes()) {
    const granary::InterfaceInfo& iface = *info->interface;
    for (size_t i = 0; i < iface.method_count; ++i) {
      if (iface.methods[i].one_way) {
        one_way_methods->emplace(iface.methods[i].full_name);
      }
      if (iface.methods[i].server_streaming) {
        streaming_methods->emplace(iface.methods[i].full_name);
      }
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary::fuzz;
  if (size > kMaxInputBytes) return -1;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  granary::v1::RequestBatch batch;
  const bool decodes = batch.ParseFromString(bytes);
  if (decodes) {
    for (const granary::v1::Request& r : batch.requests()) {
      CheckTrace(r);
      CheckOpaque(r);
    }
  }
  Exchange(*client_gateway, bytes, decodes ? &batch : nullptr);
  Exchange(*silo_gateway, bytes, decodes ? &batch : nullptr);
  return 0;
}
