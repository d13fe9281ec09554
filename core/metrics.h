// File: core/metrics.h
// -----------------------------------------------------------------------------
// A small metrics registry: counters, gauges and histograms with labels,
// rendered in the Prometheus text exposition format (version 0.0.4).
//
//   metrics::Registry registry;
//   auto& calls = registry.AddCounter("granary_calls_total", "Calls served.",
//                                     {"type", "method"});
//   metrics::Counter* add = calls.WithLabels({"Counter", "Add"});  // once
//   add->Inc();                                                     // hot path
//   auto& latency = registry.AddHistogram(
//       "granary_call_seconds", "Call latency.", {}, metrics::LatencyBuckets());
//   latency.WithLabels({})->Observe(0.00012);
//   registry.AddCallback("process_open_fds", "Open fds.", metrics::Type::kGauge,
//                        {}, [] { return metrics::Samples{{{}, 12.0}}; });
//   std::string text = registry.Render();
//
// Updating a metric is lock-free: counters and histograms add to one of
// several cache-line-sized shards picked per thread (relaxed atomics), gauges
// are one relaxed atomic. Looking a child up by its labels takes the family's
// lock: do it once and keep the pointer (children live as long as the
// registry). Names and label names follow Prometheus' rules; a bad name or a
// wrong number of label values is a programming error and throws
// std::invalid_argument.
//
// Threading: everything is thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/sync.h"

namespace granary::metrics {

enum class Type { kCounter, kGauge, kHistogram };

using Labels = std::vector<std::string>;
// Label values and value of one sample of a callback metric.
using Samples = std::vector<std::pair<Labels, double>>;

namespace internal {
inline constexpr int kShards = 8;
// A small per-thread number that spreads threads over the shards.
int ThisThreadShard();
}  // namespace internal

class Counter {
 public:
  void Inc(uint64_t n = 1) {
    shards_[internal::ThisThreadShard()].v.fetch_add(
        n, std::memory_order_relaxed);
  }
  uint64_t Value() const;

 private:
  struct alignas(64) Shard {
    std::atomic<uint64_t> v{0};
  };
  std::array<Shard, internal::kShards> shards_;
};

class Gauge {
 public:
  void Set(double v) { v_.store(v, std::memory_order_relaxed); }
  void Add(double d) { v_.fetch_add(d, std::memory_order_relaxed); }
  double Value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

// Buckets are upper bounds (le); an observation lands in the first bucket
// whose bound is >= the value, or in +Inf.
class Histogram {
 public:
  explicit Histogram(const std::vector<double>* bounds);
  ~Histogram();
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double v);

  struct Snapshot {
    std::vector<uint64_t> buckets;  // per bound then +Inf, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Take() const;
  const std::vector<double>& bounds() const { return *bounds_; }

 private:
  const std::vector<double>* bounds_;
  struct alignas(64) Shard {
    std::unique_ptr<std::atomic<uint64_t>[]> buckets;
    std::atomic<double> sum{0};
  };
  std::array<Shard, internal::kShards> shards_;
};

// Exponential bounds for latencies in seconds: 10 µs .. ~10 s.
std::vector<double> LatencyBuckets();
// Bounds for small counts (queue depths): 0, 1, 2, 4, ... 65536.
std::vector<double> DepthBuckets();

class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, Type type,
             std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  Type type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Appends this family's samples in the exposition format.
  virtual void Render(std::string* out) const = 0;

 protected:
  void CheckLabels(const Labels& values) const;

 private:
  std::string name_;
  std::string help_;
  Type type_;
  std::vector<std::string> label_names_;
};

template <typename Metric>
class Family final : public FamilyBase {
 public:
  using FamilyBase::FamilyBase;
  Family(std::string name, std::string help, Type type,
         std::vector<std::string> label_names, std::vector<double> bounds)
      : FamilyBase(std::move(name), std::move(help), type,
                   std::move(label_names)),
        bounds_(std::move(bounds)) {}

  // The child with these label values (created on first use). Takes the
  // family's lock: call once, keep the pointer.
  Metric* WithLabels(const Labels& values) {
    CheckLabels(values);
    MutexLock lock(&mu_);
    std::unique_ptr<Metric>& slot = children_[values];
    if (slot == nullptr) {
      if constexpr (std::is_same_v<Metric, Histogram>) {
        slot = std::make_unique<Metric>(&bounds_);
      } else {
        slot = std::make_unique<Metric>();
      }
    }
    return slot.get();
  }
  // Calls fn(labels, metric) for every child, in label order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    MutexLock lock(&mu_);
    for (const auto& [labels, m] : children_) fn(labels, *m);
  }
  void Render(std::string* out) const override;

 private:
  std::vector<double> bounds_;
  mutable Mutex mu_;
  std::map<Labels, std::unique_ptr<Metric>> children_ ABSL_GUARDED_BY(mu_);
};

template <>
void Family<Counter>::Render(std::string* out) const;
template <>
void Family<Gauge>::Render(std::string* out) const;
template <>
void Family<Histogram>::Render(std::string* out) const;

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Family<Counter>& AddCounter(std::string name, std::string help,
                              std::vector<std::string> label_names);
  Family<Gauge>& AddGauge(std::string name, std::string help,
                          std::vector<std::string> label_names);
  Family<Histogram>& AddHistogram(std::string name, std::string help,
                                  std::vector<std::string> label_names,
                                  std::vector<double> bounds);
  // A metric whose samples `fn` computes at every Render (a counter it
  // reads from elsewhere, a gauge of a size, process figures).
  void AddCallback(std::string name, std::string help, Type type,
                   std::vector<std::string> label_names,
                   std::function<Samples()> fn);

  // Every family, sorted by name, in the text exposition format.
  std::string Render() const;

 private:
  void Add(std::unique_ptr<FamilyBase> family);

  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_
      ABSL_GUARDED_BY(mu_);
};

// The exposition format's number syntax (+Inf, -Inf, NaN, shortest
// round-trip decimal otherwise).
std::string FormatValue(double v);
// A label value with \, " and newline escaped.
std::string EscapeLabelValue(const std::string& v);

// Resident memory of this process in bytes (/proc/self/statm); 0 when
// unknown.
int64_t ResidentBytes();

// Registers process_* metrics read from /proc/self: resident and virtual
// memory, CPU seconds, open and maximum file descriptors, start time.
void AddProcessMetrics(Registry* registry);

}  // namespace granary::metrics
