// File: silo/runtime/silo_metrics.h
// -----------------------------------------------------------------------------
// The metrics a silo publishes (Prometheus names, docs/operations.md), as
// pointers the runtime updates on its hot paths without locks. The silo owns
// one registry and one SiloMetrics; every grain type gets a TypeMetrics when
// it is registered.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/clock.h"  // MonoNanos
#include "core/metrics.h"

namespace granary {
struct InterfaceInfo;
}  // namespace granary

namespace granary::silo {

// What a delivered message was, for granary_messages_total{kind}.
enum class MessageLabel : int {
  kRequest,
  kOneWay,
  kResponse,
  kTimer,
  kReminder,
  kResume,
  kControl,
  kCount
};

// Per method of a grain type.
struct MethodMetrics {
  metrics::Histogram* duration = nullptr;
  // Errors by status code, created on the first error with that code.
  std::array<std::atomic<metrics::Counter*>, 17> errors{};
};

// Per grain type.
struct TypeMetrics {
  metrics::Gauge* activations = nullptr;
  metrics::Counter* created = nullptr;
  std::array<metrics::Counter*, 6> deactivated{};  // by DeactivationReason
  std::unique_ptr<MethodMetrics[]> methods;
};

class SiloMetrics {
 public:
  explicit SiloMetrics(metrics::Registry* registry);

  metrics::Registry& registry() { return *registry_; }
  std::unique_ptr<TypeMetrics> ForType(const InterfaceInfo& iface);
  // Counts an error of `method` (slow path: the first error of a code takes
  // the family's lock).
  void CountError(const InterfaceInfo& iface, uint32_t method, MethodMetrics& m,
                  absl::StatusCode code);

  metrics::Counter* received(MessageLabel kind) {
    return received_[static_cast<int>(kind)];
  }
  metrics::Counter* sent_requests = nullptr;
  metrics::Counter* sent_one_way = nullptr;
  metrics::Histogram* mailbox_depth = nullptr;
  metrics::Histogram* turn_duration = nullptr;
  metrics::Counter* slow_turns = nullptr;
  metrics::Counter* directory_hits = nullptr;
  metrics::Counter* directory_misses = nullptr;
  metrics::Histogram* storage_read = nullptr;
  metrics::Histogram* storage_write = nullptr;
  metrics::Histogram* storage_clear = nullptr;
  metrics::Histogram* reminder_write = nullptr;
  metrics::Histogram* reminder_remove = nullptr;
  metrics::Histogram* reminder_list = nullptr;  // asked of a cluster's primary
  metrics::Gauge* gateway_connections = nullptr;
  // A call that found its activation's mailbox at --max_mailbox: a request
  // refused, or a one-way call queued against its sender's budget.
  metrics::Counter* mailbox_full_requests = nullptr;
  metrics::Counter* mailbox_full_one_way = nullptr;
  metrics::Counter* mailbox_pushback = nullptr;
  // A gateway stream stopped reading: its connection's budget, or the
  // silo's, was used up.
  metrics::Counter* paused_connection = nullptr;
  metrics::Counter* paused_silo = nullptr;
  // Memory pressure (RuntimeOptions::max_activations, memory_limit): idle
  // activations asked to deactivate, and activations refused.
  metrics::Counter* shed_requests = nullptr;
  metrics::Counter* activations_refused_max = nullptr;
  metrics::Counter* activations_refused_memory = nullptr;
  // Gateway streams refused because --max_gateway_streams were open.
  metrics::Counter* streams_refused = nullptr;
  // Standard gRPC calls refused while the silo's budget was used up.
  metrics::Counter* refused_over_budget = nullptr;

 private:
  metrics::Registry* registry_;
  metrics::Family<metrics::Gauge>* activations_;
  metrics::Family<metrics::Counter>* created_;
  metrics::Family<metrics::Counter>* deactivated_;
  metrics::Family<metrics::Histogram>* request_duration_;
  metrics::Family<metrics::Counter>* request_errors_;
  std::array<metrics::Counter*, static_cast<int>(MessageLabel::kCount)>
      received_{};
};

}  // namespace granary::silo
