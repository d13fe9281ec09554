#include "silo/runtime/silo_metrics.h"

#include <time.h>

#include <string>

#include "absl/status/status.h"
#include "core/grain_interface.h"
#include "silo/runtime/activation.h"

namespace granary::silo {

SiloMetrics::SiloMetrics(metrics::Registry* registry) : registry_(registry) {
  constexpr double kNanos = 1e-9;  // durations are recorded in nanoseconds
  using metrics::DepthBuckets;
  using metrics::LatencyBuckets;
  metrics::Registry& r = *registry;
  activations_ =
      &r.AddGauge("granary_activations",
                  "Activations on this silo, by grain type.", {"type"});
  created_ = &r.AddCounter("granary_activations_created_total",
                           "Activations created, by grain type.", {"type"});
  deactivated_ = &r.AddCounter(
      "granary_activations_deactivated_total",
      "Activations that deactivated, by grain type and reason (idle, "
      "requested, shutdown, activation_failed, memory_pressure, migrated: "
      "handed to another silo).",
      {"type", "reason"});
  request_duration_ = &r.AddHistogram(
      "granary_request_duration_seconds",
      "Time from a request's first turn to its reply, server side, by grain "
      "type and method.",
      {"type", "method"}, LatencyBuckets(), kNanos);
  request_errors_ = &r.AddCounter(
      "granary_request_errors_total",
      "Requests that ended with an error status, by grain type, method and "
      "gRPC status code.",
      {"type", "method", "code"});
  auto& messages = r.AddCounter(
      "granary_messages_total",
      "Messages: received by activations (direction=\"in\", by kind) and "
      "calls sent by grain code (direction=\"out\").",
      {"direction", "kind"});
  static constexpr const char* kKinds[] = {"request", "one_way",  "response",
                                           "timer",   "reminder", "resume",
                                           "control"};
  for (int i = 0; i < static_cast<int>(MessageLabel::kCount); ++i) {
    received_[i] = messages.WithLabels({"in", kKinds[i]});
  }
  sent_requests = messages.WithLabels({"out", "request"});
  sent_one_way = messages.WithLabels({"out", "one_way"});
  mailbox_depth =
      r.AddHistogram("granary_mailbox_depth",
                     "Messages waiting in an activation's mailbox when a "
                     "worker picks it up.",
                     {}, DepthBuckets(), 1)
          .WithLabels({});
  auto& mailbox_full = r.AddCounter(
      "granary_mailbox_full_total",
      "Calls that found their activation's mailbox holding --max_mailbox "
      "requests: requests refused with RESOURCE_EXHAUSTED (kind=request), "
      "one-way calls queued and held against their sender's budget "
      "(kind=one_way).",
      {"kind"});
  mailbox_full_requests = mailbox_full.WithLabels({"request"});
  mailbox_full_one_way = mailbox_full.WithLabels({"one_way"});
  mailbox_pushback =
      r.AddCounter("granary_mailbox_pushback_total",
                   "Times a grain's next turn waited because a one-way "
                   "call it sent found the target's mailbox full.",
                   {})
          .WithLabels({});
  auto& paused = r.AddCounter(
      "granary_gateway_paused_total",
      "Times a gateway stream stopped reading because its connection's "
      "memory budget (budget=connection) or the silo's (budget=silo) was "
      "used up.",
      {"budget"});
  paused_connection = paused.WithLabels({"connection"});
  paused_silo = paused.WithLabels({"silo"});
  shed_requests =
      r.AddCounter("granary_activations_shed_total",
                   "Idle activations asked to deactivate because the silo "
                   "was over --max_activations or --memory_limit (those "
                   "that deactivate are counted with reason "
                   "memory_pressure).",
                   {})
          .WithLabels({});
  auto& refused_activations =
      r.AddCounter("granary_activations_refused_total",
                   "Calls that would have created an activation, refused with "
                   "RESOURCE_EXHAUSTED: the silo held --max_activations "
                   "(reason=max_activations) or was over --memory_limit "
                   "(reason=memory_limit).",
                   {"reason"});
  activations_refused_max = refused_activations.WithLabels({"max_activations"});
  activations_refused_memory = refused_activations.WithLabels({"memory_limit"});
  streams_refused =
      r.AddCounter("granary_gateway_streams_refused_total",
                   "Gateway streams refused with RESOURCE_EXHAUSTED because "
                   "--max_gateway_streams were open.",
                   {})
          .WithLabels({});
  refused_over_budget =
      r.AddCounter("granary_grpc_refused_over_budget_total",
                   "Calls of the standard gRPC services refused with "
                   "RESOURCE_EXHAUSTED because the silo's memory budget for "
                   "remote calls was used up.",
                   {})
          .WithLabels({});
  turn_duration = r.AddHistogram("granary_turn_duration_seconds",
                                 "Time one message (a turn) held a worker.", {},
                                 LatencyBuckets(), kNanos)
                      .WithLabels({});
  slow_turns = r.AddCounter("granary_slow_turns_total",
                            "Turns longer than the silo's slow-turn "
                            "threshold (each is also logged).",
                            {})
                   .WithLabels({});
  auto& lookups = r.AddCounter(
      "granary_directory_lookups_total",
      "Calls routed by the directory: to an existing activation (hit) or "
      "one that had to be created (miss).",
      {"result"});
  directory_hits = lookups.WithLabels({"hit"});
  directory_misses = lookups.WithLabels({"miss"});
  auto& storage = r.AddHistogram(
      "granary_storage_operation_duration_seconds",
      "Grain storage and reminder table operations as grains await them, "
      "by operation.",
      {"op"}, LatencyBuckets(), kNanos);
  storage_read = storage.WithLabels({"read"});
  storage_write = storage.WithLabels({"write"});
  storage_clear = storage.WithLabels({"clear"});
  reminder_write = storage.WithLabels({"reminder_write"});
  reminder_remove = storage.WithLabels({"reminder_remove"});
  reminder_list = storage.WithLabels({"reminder_list"});
  gateway_connections =
      r.AddGauge("granary_gateway_connections",
                 "Client connections (gateway streams) open.", {})
          .WithLabels({});
}

std::unique_ptr<TypeMetrics> SiloMetrics::ForType(const InterfaceInfo& iface) {
  auto m = std::make_unique<TypeMetrics>();
  const std::string type(iface.type_name);
  m->activations = activations_->WithLabels({type});
  m->created = created_->WithLabels({type});
  for (DeactivationReason r :
       {DeactivationReason::kIdle, DeactivationReason::kRequested,
        DeactivationReason::kShutdown, DeactivationReason::kActivationFailed,
        DeactivationReason::kMemoryPressure, DeactivationReason::kMigrated}) {
    m->deactivated[static_cast<int>(r)] =
        deactivated_->WithLabels({type, DeactivationReasonName(r)});
  }
  m->methods = std::make_unique<MethodMetrics[]>(iface.method_count);
  for (uint32_t i = 0; i < iface.method_count; ++i) {
    m->methods[i].duration = request_duration_->WithLabels(
        {type, std::string(iface.methods[i].name)});
  }
  return m;
}

void SiloMetrics::CountError(const InterfaceInfo& iface, uint32_t method,
                             MethodMetrics& m, absl::StatusCode code) {
  const int c = static_cast<int>(code);
  if (c < 0 || c >= static_cast<int>(m.errors.size())) return;
  metrics::Counter* counter = m.errors[c].load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = request_errors_->WithLabels(
        {std::string(iface.type_name), std::string(iface.methods[method].name),
         absl::StatusCodeToString(code)});
    m.errors[c].store(counter, std::memory_order_release);
  }
  counter->Inc();
}

}  // namespace granary::silo
