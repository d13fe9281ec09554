#include "examples/counter_grain.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/request_context.h"
#include "core/status.h"
#include "examples/alarm_grain.h"
#include "examples/bank_grain.h"
#include "examples/chat_grain.h"
#include "silo/runtime/runtime.h"

namespace granary::examples {
namespace {

// `value + amount`; OUT_OF_RANGE (thrown, the counter unchanged) when the
// sum does not fit in an int64.
int64_t Sum(int64_t value, int64_t amount) {
  int64_t sum = 0;
  if (__builtin_add_overflow(value, amount, &sum)) {
    throw StatusError(absl::OutOfRangeError(absl::StrCat(
        "adding ", amount, " to the counter's ", value, " overflows")));
  }
  return sum;
}

}  // namespace

Task<CounterValue> CounterGrain::Add(const AddRequest& request) {
  value_ = Sum(value_, request.amount());
  CounterValue reply;
  reply.set_value(value_);
  co_return reply;
}

Task<CounterValue> CounterGrain::Get(const GetRequest&) {
  CounterValue reply;
  reply.set_value(value_);
  co_return reply;
}

Task<void> CounterGrain::Bump(const AddRequest& request) {
  value_ = Sum(value_, request.amount());
  co_return;
}

Task<PingReply> PingGrain::Ping(const PingRequest& request) {
  PingReply reply;
  reply.set_message(request.message());
  reply.set_silo(SiloName());
  reply.set_activation_id(ActivationId());
  co_return reply;
}

Task<RelayReply> PingGrain::Relay(const RelayRequest& request) {
  int hops = 0;
  if (std::optional<std::string> seen = GetContext("relay-hops")) {
    if (!absl::SimpleAtoi(*seen, &hops)) hops = 0;
  }
  if (absl::Status s = SetContext("relay-hops", absl::StrCat(hops + 1));
      !s.ok()) {
    throw StatusError(std::move(s));
  }
  const std::string here = absl::StrCat(GetGrainId().key(), "@", SiloName());
  GRANARY_LOG(kInfo) << "grain=" << LogQuote(GetGrainId().ToString())
                     << " hop=" << hops + 1 << " relay";
  RelayReply reply;
  if (request.path().empty()) {
    reply.add_hops(here);
    for (const auto& [k, v] : ContextEntries()) {
      reply.add_context(absl::StrCat(k, "=", v));
    }
    reply.set_trace_id(CurrentTraceId());
    co_return reply;
  }
  RelayRequest next;
  next.mutable_path()->CopyFrom(request.path());
  next.mutable_path()->erase(next.mutable_path()->begin());
  RelayReply below = co_await GetGrain<PingRef>(request.path(0)).Relay(next);
  reply.add_hops(here);
  reply.mutable_hops()->MergeFrom(below.hops());
  *reply.mutable_context() = std::move(*below.mutable_context());
  reply.set_trace_id(below.trace_id());
  co_return reply;
}

absl::Status AddExampleGrains(silo::Runtime& silo) {
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<CounterGrain>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<PingGrain>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<BankAccountGrain>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<AlarmGrain>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<ChatGrain>());
  return absl::OkStatus();
}

}  // namespace granary::examples
