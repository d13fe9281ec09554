#include "core/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/check.h"

namespace granary::metrics {
namespace internal {

int NextThreadShard() {
  static std::atomic<int> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) % kShards;
}

}  // namespace internal

namespace {

bool ValidName(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '_' || (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

const char* TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` (with `extra` appended, e.g. le="0.1"), or "" when empty.
std::string LabelSet(const std::vector<std::string>& names,
                     const Labels& values, const std::string& extra = "") {
  if (names.empty() && extra.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, names[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra.empty()) {
    if (!names.empty()) out += ",";
    out += extra;
  }
  out += "}";
  return out;
}

void Header(const FamilyBase& f, std::string* out) {
  absl::StrAppend(out, "# HELP ", f.name(), " ", EscapeHelp(f.help()), "\n",
                  "# TYPE ", f.name(), " ", TypeName(f.type()), "\n");
}

class CallbackFamily final : public FamilyBase {
 public:
  CallbackFamily(std::string name, std::string help, Type type,
                 std::vector<std::string> label_names,
                 std::function<Samples()> fn)
      : FamilyBase(std::move(name), std::move(help), type,
                   std::move(label_names)),
        fn_(std::move(fn)) {}
  void Render(std::string* out) const override {
    Samples samples = fn_();
    std::sort(samples.begin(), samples.end());
    Header(*this, out);
    for (const auto& [labels, value] : samples) {
      if (labels.size() != label_names().size()) continue;
      absl::StrAppend(out, name(), LabelSet(label_names(), labels), " ",
                      FormatValue(value), "\n");
    }
  }

 private:
  std::function<Samples()> fn_;
};

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return absl::StrCat(v);
  return std::string(buf, end);
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

uint64_t Counter::Value() const {
  uint64_t total = 0;
  for (const Shard& s : shards_) total += s.v.load(std::memory_order_relaxed);
  return total;
}

Histogram::Histogram(const Layout* layout) : layout_(layout) {
  const size_t n = layout_->bounds.size() + 1;
  for (Shard& s : shards_) {
    s.buckets = std::make_unique<std::atomic<uint64_t>[]>(n);
    for (size_t i = 0; i < n; ++i) s.buckets[i].store(0);
  }
}

Histogram::~Histogram() = default;

void Histogram::Observe(double v) {
  const double units = std::round(v / layout_->unit);
  ObserveUnits(units <= 0 ? 0 : static_cast<uint64_t>(units));
}

void Histogram::AddCounts(const uint32_t* counts, size_t n,
                          uint64_t sum_units) {
  Shard& s = shards_[internal::ThisThreadShard()];
  const size_t buckets = std::min(n, layout_->bounds.size() + 1);
  for (size_t i = 0; i < buckets; ++i) {
    if (counts[i] != 0) {
      s.buckets[i].fetch_add(counts[i], std::memory_order_relaxed);
    }
  }
  s.sum.fetch_add(sum_units, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Take() const {
  const size_t n = layout_->bounds.size() + 1;
  Snapshot snap;
  snap.buckets.assign(n, 0);
  uint64_t sum = 0;
  for (const Shard& s : shards_) {
    for (size_t i = 0; i < n; ++i) {
      snap.buckets[i] += s.buckets[i].load(std::memory_order_relaxed);
    }
    sum += s.sum.load(std::memory_order_relaxed);
  }
  for (uint64_t b : snap.buckets) snap.count += b;
  snap.sum = static_cast<double>(sum) * layout_->unit;
  return snap;
}

std::vector<double> LatencyBuckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
          0.0025,  0.005,    0.01,    0.025,  0.05,    0.1,    0.25,
          0.5,     1,        2.5,     5,      10};
}

std::vector<double> DepthBuckets() {
  std::vector<double> b = {0};
  for (double v = 1; v <= 65536; v *= 2) b.push_back(v);
  return b;
}

FamilyBase::FamilyBase(std::string name, std::string help, Type type,
                       std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {
  GRANARY_CHECK(ValidName(name_, /*allow_colon=*/true))
      << "invalid metric name '" << name_ << "'";
  for (const std::string& l : label_names_) {
    GRANARY_CHECK(ValidName(l, /*allow_colon=*/false) &&
                  l.rfind("__", 0) != 0 &&
                  !(type_ == Type::kHistogram && l == "le"))
        << "invalid label name '" << l << "' of " << name_;
  }
}

void FamilyBase::CheckLabels(const Labels& values) const {
  GRANARY_CHECK(values.size() == label_names_.size())
      << name_ << " takes " << label_names_.size() << " label values, got "
      << values.size();
}

template <>
void Family<Counter>::Render(std::string* out) const {
  Header(*this, out);
  ForEach([&](const Labels& labels, const Counter& c) {
    absl::StrAppend(out, name(), LabelSet(label_names(), labels), " ",
                    c.Value(), "\n");
  });
}

template <>
void Family<Gauge>::Render(std::string* out) const {
  Header(*this, out);
  ForEach([&](const Labels& labels, const Gauge& g) {
    absl::StrAppend(out, name(), LabelSet(label_names(), labels), " ",
                    FormatValue(g.Value()), "\n");
  });
}

template <>
void Family<Histogram>::Render(std::string* out) const {
  Header(*this, out);
  ForEach([&](const Labels& labels, const Histogram& h) {
    const Histogram::Snapshot snap = h.Take();
    uint64_t cumulative = 0;
    const std::vector<double>& bounds = layout_.bounds;
    for (size_t i = 0; i <= bounds.size(); ++i) {
      cumulative += snap.buckets[i];
      const std::string le =
          i < bounds.size() ? FormatValue(bounds[i]) : "+Inf";
      absl::StrAppend(out, name(), "_bucket",
                      LabelSet(label_names(), labels, "le=\"" + le + "\""), " ",
                      cumulative, "\n");
    }
    absl::StrAppend(out, name(), "_sum", LabelSet(label_names(), labels), " ",
                    FormatValue(snap.sum), "\n", name(), "_count",
                    LabelSet(label_names(), labels), " ", snap.count, "\n");
  });
}

Family<Counter>& Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names) {
  auto f = std::make_unique<Family<Counter>>(
      std::move(name), std::move(help), Type::kCounter, std::move(label_names));
  Family<Counter>& ref = *f;
  Add(std::move(f));
  return ref;
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help,
                                  std::vector<std::string> label_names) {
  auto f = std::make_unique<Family<Gauge>>(
      std::move(name), std::move(help), Type::kGauge, std::move(label_names));
  Family<Gauge>& ref = *f;
  Add(std::move(f));
  return ref;
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> bounds,
                                          double unit) {
  GRANARY_CHECK(
      !bounds.empty() && std::is_sorted(bounds.begin(), bounds.end()) &&
      std::adjacent_find(bounds.begin(), bounds.end()) == bounds.end() &&
      bounds.front() >= 0)
      << "histogram " << name << " needs increasing, non-negative bounds";
  GRANARY_CHECK(unit > 0) << "histogram " << name << " needs a positive unit";
  Histogram::Layout layout;
  layout.unit = unit;
  for (double b : bounds) {
    layout.bound_units.push_back(static_cast<uint64_t>(std::round(b / unit)));
  }
  GRANARY_CHECK(layout.bound_units.size() + 1 <= HistogramBatch::kMaxBuckets)
      << "histogram " << name << " has too many buckets";
  GRANARY_CHECK(std::adjacent_find(layout.bound_units.begin(),
                                   layout.bound_units.end()) ==
                layout.bound_units.end())
      << "histogram " << name << " has bounds closer than its unit";
  layout.bounds = std::move(bounds);
  auto f = std::make_unique<Family<Histogram>>(
      std::move(name), std::move(help), Type::kHistogram,
      std::move(label_names), std::move(layout));
  Family<Histogram>& ref = *f;
  Add(std::move(f));
  return ref;
}

void Registry::AddCallback(std::string name, std::string help, Type type,
                           std::vector<std::string> label_names,
                           std::function<Samples()> fn) {
  GRANARY_CHECK(type != Type::kHistogram)
      << "callback metrics are counters or gauges (" << name << ")";
  Add(std::make_unique<CallbackFamily>(std::move(name), std::move(help), type,
                                       std::move(label_names), std::move(fn)));
}

void Registry::Add(std::unique_ptr<FamilyBase> family) {
  MutexLock lock(&mu_);
  const std::string name = family->name();
  const bool added = families_.emplace(name, std::move(family)).second;
  GRANARY_CHECK(added) << "metric '" << name << "' is already registered";
}

std::string Registry::Render() const {
  std::string out;
  MutexLock lock(&mu_);
  for (const auto& [name, family] : families_) family->Render(&out);
  return out;
}

namespace {

// Fields of /proc/self/stat after the command name.
std::vector<std::string> ProcStat() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  return absl::StrSplit(line.substr(close + 2), ' ');
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime") {
      in >> value;
      return value;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace

int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : 0;
}

void AddProcessMetrics(Registry* registry) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // Fields (0-based after the command): 11 utime, 12 stime, 19 starttime,
  // 20 vsize, 21 rss (pages).
  registry->AddCallback(
      "process_cpu_seconds_total", "User and system CPU time spent in seconds.",
      Type::kCounter, {}, [ticks]() -> Samples {
        std::vector<std::string> f = ProcStat();
        if (f.size() < 22) return {};
        return {{{}, (std::stod(f[11]) + std::stod(f[12])) / ticks}};
      });
  registry->AddCallback("process_resident_memory_bytes",
                        "Resident memory size in bytes.", Type::kGauge, {},
                        [page]() -> Samples {
                          std::vector<std::string> f = ProcStat();
                          if (f.size() < 22) return {};
                          return {{{}, std::stod(f[21]) * page}};
                        });
  registry->AddCallback("process_virtual_memory_bytes",
                        "Virtual memory size in bytes.", Type::kGauge, {},
                        []() -> Samples {
                          std::vector<std::string> f = ProcStat();
                          if (f.size() < 22) return {};
                          return {{{}, std::stod(f[20])}};
                        });
  const double boot = BootTimeSeconds();
  registry->AddCallback(
      "process_start_time_seconds",
      "Start time of the process since unix epoch in seconds.", Type::kGauge,
      {}, [boot, ticks]() -> Samples {
        std::vector<std::string> f = ProcStat();
        if (f.size() < 22 || boot == 0) return {};
        return {{{}, boot + std::stod(f[19]) / ticks}};
      });
  registry->AddCallback(
      "process_open_fds", "Number of open file descriptors.", Type::kGauge, {},
      []() -> Samples {
        std::error_code ec;
        double n = 0;
        for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
             !ec && it != std::filesystem::directory_iterator();
             it.increment(ec)) {
          ++n;
        }
        return {{{}, n}};
      });
  registry->AddCallback("process_max_fds",
                        "Maximum number of open file descriptors.",
                        Type::kGauge, {}, []() -> Samples {
                          rlimit limit;
                          if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return {};
                          return {{{}, static_cast<double>(limit.rlim_cur)}};
                        });
}

}  // namespace granary::metrics
