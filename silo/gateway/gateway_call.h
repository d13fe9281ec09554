// File: silo/gateway/gateway_call.h
// -----------------------------------------------------------------------------
// Who calls through a Gateway stream, and the call a request read from it
// asks for, before the stream charges and starts it
// (silo/gateway/gateway_server_stream.cc).
//
//   absl::StatusOr<CallBase*> call =
//       CallFromGatewayRequest(route, request, from_silos, caller, silo);
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/call.h"
#include "core/log.h"
#include "core/memory_budget.h"
#include "core/sync.h"
#include "granary/v1/gateway.pb.h"
#include "silo/gateway/gateway_service_impl.h"

namespace granary::silo {

class Runtime;

// At debug level: `call` of gRPC path `method` was accepted `from` "client",
// "silo" or "grpc", with its trace id (how one request is followed through
// a silo's log).
#define GRANARY_LOG_CALL_ACCEPTED(call, method, from)                         \
  GRANARY_LOG(kDebug) << "trace_id="                                          \
                      << (call).request_context().trace.TraceIdHex()          \
                      << " grain=" << LogQuote((call).target().ToString())    \
                      << " method=" << LogQuote(method) << " from=" << (from) \
                      << " call accepted"

// What a call of `request` holds while it runs: its key, request (the
// payload's size stands in for the parsed message's) and context, and the
// call.
int64_t CallBytes(const v1::Request& request);

// Whether `request` may start on `route` (null: no such method):
// UNIMPLEMENTED for an unknown method; UNAVAILABLE when the gateway is
// `stopping` and `silo` is not in a cluster (a clustered silo sends calls on
// to the grains' new homes); INVALID_ARGUMENT for a server-streaming request
// without an id (its items are replies to that id).
absl::Status CheckGatewayRoute(const Route* route, const v1::Request& request,
                               bool stopping, Runtime& silo);

// Splits a gRPC method path "/<type>/<method>" (each part non-empty, the
// method not a silo-only "$..." one); false when it is not one.
bool SplitMethodPath(absl::string_view path, absl::string_view* type,
                     absl::string_view* method);

// The route of a request whose method this silo does not know (route
// `known` is null): in a cluster, an opaque call to a silo that hosts its
// type (a rolling upgrade: docs/upgrades.md). UNIMPLEMENTED, naming the
// type, when no live silo hosts it, or outside a cluster; INVALID_ARGUMENT
// for a method path that is not "/<type>/<method>".
absl::StatusOr<Route> OpaqueRoute(const v1::Request& request, Runtime& silo);

// UNIMPLEMENTED when the request asks for a version of its grain type
// (Request.min_version) that no live silo of the cluster hosts: refused
// alone, before it waits with other calls to the same grain.
absl::Status CheckMinVersion(const Route& route, const v1::Request& request,
                             Runtime& silo);

// The error reply to request `id`.
v1::Reply ErrorReply(uint64_t id, const absl::Status& error);

// The bytes a Gateway stream holds (its calls, and the replies it has not
// written), charged to it and to its silo's budget (null: links from other
// silos, bounded by their own limit only). Thread-safe.
class ConnectionBytes {
 public:
  explicit ConnectionBytes(MemoryBudget* silo_budget)
      : silo_budget_(silo_budget) {}
  void Charge(int64_t bytes);
  // Gives `bytes` back; never with the stream's lock held (the silo's budget
  // may wake that very stream). Returns the bytes held before.
  int64_t Release(int64_t bytes);
  // seq_cst, as Release: ServedStreams::PumpLocked relies on it.
  int64_t held() const { return bytes_.load(); }
  // Bytes left below `limit` (none: 0 or less); `limit` 0 is no limit.
  int64_t Room(int64_t limit) const {
    return limit <= 0 ? std::numeric_limits<int64_t>::max() : limit - held();
  }

 private:
  MemoryBudget* const silo_budget_;
  std::atomic<int64_t> bytes_{0};
};

// The identity a client stream was accepted with; null when anonymous.
std::shared_ptr<const std::string> CallerOf(
    const grpc::CallbackServerContext& context);

// A new call (holding one reference) of `route` built from `request`, whose
// key (and caller) it moves out. Errors: a key that is not valid, or a
// payload that does not parse -> INVALID_ARGUMENT. The call's deadline is
// the request's timeout (kDefaultCallTimeout without one); its caller tag
// is the request's id. From another silo (`from_silos`) the request carries
// its hop count, call chain and the identity of the client it serves; from a
// client, the call serves `caller` (null: anonymous). Every request's
// context entries are validated (INVALID_ARGUMENT past the bounds of
// core/request_context.h) and its trace continued with a new span (from
// `trace`, else `traceparent`: ContinueWireTrace). From another silo the
// calling grain is kept when its type is one `silo` hosts (for call
// filters).
//
// The request is refused RESOURCE_EXHAUSTED, unparsed, when its parsed form
// would take more than `max_parsed_bytes` (core/parsed_size.h); otherwise
// `*parsed_bytes` gets that estimate, for the budgets.
// The most a request may take once parsed (core/parsed_size.h), for a
// gateway whose messages are at most `max_message_bytes`.
inline int64_t MaxParsedBytes(int max_message_bytes) {
  return int64_t{4} * max_message_bytes;
}

absl::StatusOr<CallBase*> CallFromGatewayRequest(
    const Route& route, v1::Request& request, bool from_silos,
    const std::shared_ptr<const std::string>& caller, const Runtime* silo,
    int64_t max_parsed_bytes, int64_t* parsed_bytes);

// The awaited calls a stream accepted and has not answered, by request id,
// so that a cancel from its client (RequestBatch.cancels) reaches them.
// Thread-safe.
class OpenCalls {
 public:
  // `call` (id != 0) was accepted; a duplicate id replaces the older call,
  // which can then no longer be cancelled.
  void Add(uint64_t id, CallBase* call);
  // `call` finished (before its done callback returns).
  void Remove(uint64_t id, CallBase* call);
  // Cancels the open calls among `ids`.
  void Cancel(const google::protobuf::RepeatedField<uint64_t>& ids);
  size_t size() const;

 private:
  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, CallBase*> calls_ ABSL_GUARDED_BY(mu_);
};

// The server-streaming calls a Gateway stream serves: each one's items are
// read from its channel (core/stream.h) as its client grants credit
// (Request.stream_window, RequestBatch.credits) and handed to the owner as
// item Replies, in order. Thread-safe.
class ServedStreams {
 public:
  // The Gateway stream the items go to.
  class Owner {
   public:
    // Queues item replies for writing; called with this object's lock held
    // (which keeps their order), so it must not call back into it.
    virtual void EmitItems(std::vector<v1::Reply>* items) = 0;
    // After EmitItems, without the lock: start writing.
    virtual void ItemsEmitted() = 0;
    virtual void HoldOwner() = 0;
    virtual void ReleaseOwner() = 0;
    // Bytes of items the owner may take now (its connection's budget less
    // what it holds): past it items wait, their credit kept, for Unstall.
    virtual int64_t ItemRoom() const = 0;

   protected:
    ~Owner() = default;
  };

  explicit ServedStreams(Owner* owner) : owner_(owner) {}
  ~ServedStreams();

  // Whether a stream is served as `id` (a request reusing it is refused).
  bool Serves(uint64_t id) const;
  // Streaming `call` (taking a reference) was accepted as `id`, with
  // `window` items of credit (0: the default).
  void Add(uint64_t id, CallBase* call, uint32_t window);
  // The client read `n` more items of `id`.
  void Grant(uint64_t id, uint32_t n);
  // `call` (as `id`) finished with `reply`: false when it is not served
  // here (the caller writes the reply). Else the reply is written after the
  // stream's last items: after all of them, as the client's credit allows,
  // when the call ended OK; after those the credit allows at once, the
  // rest dropped, when it failed (a failed stream does not wait for a
  // client that may never read again, such as one that half-closed).
  bool End(uint64_t id, CallBase* call, v1::Reply* reply);
  // Ends every stream with `status`: the client is gone (CANCELLED; the
  // grains see their writes fail and their ObserverSets drop them), or the
  // gateway is shutting down (UNAVAILABLE: the client watches again
  // elsewhere). A stream that ends OK with items still waiting for credit,
  // now or later, ends with `status` instead, at once.
  void EndAll(const absl::Status& status);
  // Streams served and not fully written (lock-free, for the owner's
  // plans).
  int open() const { return open_.load(std::memory_order_acquire); }
  // The owner has room again: pumps the streams that waited for it.
  void Unstall();

 private:
  struct Served {
    CallBase* call;        // a reference
    int64_t credit;        // items the client may still receive
    bool waiting = false;  // a Wake is registered with the channel
    // The call's reply, once it finished: written after its items.
    std::optional<v1::Reply> final;
  };
  // What a pump leaves to do once mu_ is released.
  struct Pumped {
    bool emitted = false;
    CallBase* fail = nullptr;  // an item did not serialize (a reference)
    std::unique_ptr<Served> ended;
    std::vector<StreamWaiter*> writers;  // to tell of the room made
    void Finish(Owner* owner);
  };
  class Wake;
  // Reads what the credit allows, emits it (and the final reply after the
  // last item, ending the stream); waits for the channel when it runs dry.
  void PumpLocked(uint64_t id, Pumped* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Pump(uint64_t id);

  Owner* const owner_;
  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Served>> served_
      ABSL_GUARDED_BY(mu_);
  std::atomic<int> open_{0};          // served_.size()
  std::atomic<bool> stalled_{false};  // a stream waits for ItemRoom
  // Set by EndAll: no more credit comes, so a stream that ends OK with
  // items still waiting for it ends with this instead (also one whose end
  // was under way while EndAll ran).
  absl::Status ending_ ABSL_GUARDED_BY(mu_);
};

// Whether a server-streaming `request` may open on a connection serving
// `served`: INVALID_ARGUMENT when its id names an open stream already,
// RESOURCE_EXHAUSTED with `max_streams` open.
absl::Status CheckStreamRequest(const ServedStreams& served,
                                const v1::Request& request, int max_streams);

// Moves replies from the front of `pending` into `batch`, up to about
// `max_batch_bytes` (always at least one); returns their ReplyBytes.
size_t MoveToBatch(std::deque<v1::Reply>* pending, int max_batch_bytes,
                   v1::ReplyBatch* batch);

// The reply to write for a finished awaited `call`: its serialized reply,
// or its error; RESOURCE_EXHAUSTED when the reply would not fit a message
// of `max_message_bytes` (less 1 KiB for the batch). To a client (not
// `from_silos`) it names the gateway of the grain's silo when known.
v1::Reply ReplyOfCall(CallBase& call, int max_message_bytes, bool from_silos);

}  // namespace granary::silo
