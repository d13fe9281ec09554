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
//       "granary_call_seconds", "Call latency.", {}, metrics::LatencyBuckets(),
//       /*unit=*/1e-9);                       // recorded in nanoseconds
//   latency.WithLabels({})->ObserveUnits(120000);   // hot path: 120 µs
//   latency.WithLabels({})->Observe(0.00012);       // the same, in seconds
//   registry.AddCallback("process_open_fds", "Open fds.",
//   metrics::Type::kGauge,
//                        {}, [] { return metrics::Samples{{{}, 12.0}}; });
//   std::string text = registry.Render();
//
// Updating a metric is lock-free: counters and histograms add to one of
// several cache-line-sized shards picked per thread (relaxed atomics), gauges
// are one relaxed atomic. Looking a child up by its labels takes the family's
// lock: do it once and keep the pointer (children live as long as the
// registry). Names and label names follow Prometheus' rules; a bad name or a
// wrong number of label values is a programming error and stops the process
// with the reason (GRANARY_CHECK, core/check.h).
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
int NextThreadShard();
// A small per-thread number that spreads threads over the shards.
inline int ThisThreadShard() {
  thread_local const int shard = NextThreadShard();
  return shard;
}
}  // namespace internal

class Counter {
 public:
  void Inc(uint64_t n = 1) {
    shards_[internal::ThisThreadShard()].v.fetch_add(n,
                                                     std::memory_order_relaxed);
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
// whose bound is >= the value, or in +Inf. Values are recorded as whole
// multiples of the family's unit (1e-9 for seconds measured in
// nanoseconds, 1 for counts), so recording is integer adds only.
class Histogram {
 public:
  struct Layout {
    std::vector<double> bounds;         // in the exposed unit (seconds, ...)
    std::vector<uint64_t> bound_units;  // the same in recorded units
    double unit = 1;
  };
  explicit Histogram(const Layout* layout);
  ~Histogram();
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void ObserveUnits(uint64_t units) {
    Shard& s = shards_[internal::ThisThreadShard()];
    s.buckets[BucketOf(units)].fetch_add(1, std::memory_order_relaxed);
    s.sum.fetch_add(units, std::memory_order_relaxed);
  }
  // The bucket `units` falls in (bounds().size() is +Inf).
  size_t BucketOf(uint64_t units) const {
    const std::vector<uint64_t>& b = layout_->bound_units;
    size_t i = 0;
    while (i < b.size() && units > b[i]) ++i;
    return i;
  }
  // Adds observations counted elsewhere (HistogramBatch).
  void AddCounts(const uint32_t* counts, size_t n, uint64_t sum_units);
  // `v` in the exposed unit, rounded to a whole number of recorded units
  // (negative values count as 0).
  void Observe(double v);

  struct Snapshot {
    std::vector<uint64_t> buckets;  // per bound then +Inf, not cumulative
    uint64_t count = 0;
    double sum = 0;  // in the exposed unit
  };
  Snapshot Take() const;
  const std::vector<double>& bounds() const { return layout_->bounds; }

 private:
  const Layout* layout_;
  struct alignas(64) Shard {
    std::unique_ptr<std::atomic<uint64_t>[]> buckets;
    std::atomic<uint64_t> sum{0};
  };
  std::array<Shard, internal::kShards> shards_;
};

// Observations of one histogram gathered by one thread and added in one go
// (a few atomic adds instead of two per observation). Not thread-safe:
// one owner; Flush before the owner stops.
class HistogramBatch {
 public:
  static constexpr size_t kMaxBuckets = 32;
  void Add(Histogram* h, uint64_t units) {
    if (h != target_) {
      Flush();
      target_ = h;
    }
    ++counts_[h->BucketOf(units)];
    sum_ += units;
    pending_ = true;
  }
  void Flush() {
    if (!pending_) return;
    target_->AddCounts(counts_.data(), counts_.size(), sum_);
    counts_.fill(0);
    sum_ = 0;
    pending_ = false;
  }

 private:
  Histogram* target_ = nullptr;
  std::array<uint32_t, kMaxBuckets> counts_{};
  uint64_t sum_ = 0;
  bool pending_ = false;
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
         std::vector<std::string> label_names, Histogram::Layout layout)
      : FamilyBase(std::move(name), std::move(help), type,
                   std::move(label_names)),
        layout_(std::move(layout)) {}

  // The child with these label values (created on first use). Takes the
  // family's lock: call once, keep the pointer.
  Metric* WithLabels(const Labels& values) {
    CheckLabels(values);
    MutexLock lock(&mu_);
    std::unique_ptr<Metric>& slot = children_[values];
    if (slot == nullptr) {
      if constexpr (std::is_same_v<Metric, Histogram>) {
        slot = std::make_unique<Metric>(&layout_);
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
  Histogram::Layout layout_;  // histograms only
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
  // `bounds` in the exposed unit; observations are recorded as multiples
  // of `unit` (bounds must be multiples of it too, after rounding).
  Family<Histogram>& AddHistogram(std::string name, std::string help,
                                  std::vector<std::string> label_names,
                                  std::vector<double> bounds, double unit);
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
