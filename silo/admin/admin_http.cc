#include "silo/admin/admin_http.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/grain_interface.h"
#include "core/member.h"
#include "core/metrics.h"
#include "core/version.h"
#include "google/protobuf/util/json_util.h"
#include "granary/v1/admin.pb.h"
#include "granary/v1/cluster.pb.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {
namespace {

constexpr int kCodes = 17;
constexpr size_t kMaxSamples = 301;  // 5 minutes of 1 s periods, plus one

// The q-quantile (0..1) of a histogram given per-bucket counts, by linear
// interpolation inside the bucket (as Prometheus' histogram_quantile); the
// highest finite bound when it falls in +Inf; 0 when empty.
double Quantile(double q, const std::vector<double>& bounds,
                const std::vector<uint64_t>& counts) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return 0;
  const double rank = q * static_cast<double>(total);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const uint64_t before = cumulative;
    cumulative += counts[i];
    if (static_cast<double>(cumulative) >= rank && counts[i] > 0) {
      if (i >= bounds.size()) return bounds.back();
      const double lower = i == 0 ? 0 : bounds[i - 1];
      const double upper = bounds[i];
      return lower + (upper - lower) * (rank - static_cast<double>(before)) /
                         static_cast<double>(counts[i]);
    }
  }
  return bounds.back();
}

}  // namespace

AdminHttp::AdminHttp(Runtime* silo, std::string gateway_address,
                     absl::Duration sample_period,
                     std::shared_ptr<TimerThread> timers)
    : silo_(silo),
      gateway_address_(std::move(gateway_address)),
      period_(sample_period),
      bounds_(metrics::LatencyBuckets()),
      timers_(Clock::System(), std::move(timers)) {
  sampler_.admin = this;
  for (const Runtime::TypeView& t : silo_->internals().TypeViews()) {
    for (uint32_t m = 0; m < t.interface->method_count; ++m) {
      keys_.push_back(MethodKey{std::string(t.interface->type_name),
                                std::string(t.interface->methods[m].name),
                                &t.metrics->methods[m]});
    }
  }
  std::sort(keys_.begin(), keys_.end(),
            [](const MethodKey& a, const MethodKey& b) {
              return std::tie(a.type, a.method) < std::tie(b.type, b.method);
            });
}

AdminHttp::~AdminHttp() { Stop(); }

void AdminHttp::Register(HttpServer* http) {
  http->Handle("/metrics", [this](const HttpRequest&) {
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                        silo_->metrics_registry().Render()};
  });
  http->Handle("/api/overview", [this](const HttpRequest&) {
    return HttpResponse{200, "application/json", OverviewJson()};
  });
  http->Handle("/", [](const HttpRequest&) {
    return HttpResponse{200, "text/html; charset=utf-8", kDashboardHtml};
  });
}

absl::Status AdminHttp::Start() {
  if (started_)
    return absl::FailedPreconditionError("the sampler runs already");
  started_ = true;
  SampleNow();
  GRANARY_RETURN_IF_ERROR(timers_.Start());
  timers_.Schedule(&sampler_, timers_.clock()->Now() + period_);
  return absl::OkStatus();
}

void AdminHttp::Stop() {
  timers_.Stop();  // waits out a sample being taken
  timers_.Cancel(&sampler_);
}

void AdminHttp::OnSample() {
  SampleNow();
  timers_.Schedule(&sampler_, timers_.clock()->Now() + period_);
}

void AdminHttp::SampleNow() {
  Sample s = Take();
  MutexLock lock(&mu_);
  samples_.push_back(std::move(s));
  while (samples_.size() > kMaxSamples) samples_.pop_front();
}

AdminHttp::Sample AdminHttp::Take() const {
  Sample s;
  s.mono_ns = MonoNanos();
  s.methods.reserve(keys_.size());
  for (const MethodKey& k : keys_) {
    const auto* m = static_cast<const MethodMetrics*>(k.metrics);
    metrics::Histogram::Snapshot snap = m->duration->Take();
    MethodSample ms;
    ms.buckets = std::move(snap.buckets);
    ms.count = snap.count;
    ms.errors.assign(kCodes, 0);
    for (int c = 0; c < kCodes; ++c) {
      if (const metrics::Counter* counter =
              m->errors[c].load(std::memory_order_acquire)) {
        ms.errors[c] = counter->Value();
      }
    }
    s.calls += ms.count;
    s.methods.push_back(std::move(ms));
  }
  return s;
}

void AdminHttp::Fill(v1::Overview* out) {
  const Sample now = Take();
  std::vector<Sample> history;
  v1::MembershipView membership;
  bool clustered = false;
  {
    MutexLock lock(&mu_);
    history.assign(samples_.begin(), samples_.end());
    if (membership_) {
      membership = membership_();
      clustered = true;
    }
  }
  // The sample closest to one minute ago (the oldest when younger).
  const int64_t minute_ago = now.mono_ns - int64_t{60} * 1000000000;
  const Sample* then = history.empty() ? &now : &history.front();
  for (const Sample& s : history) {
    if (s.mono_ns <= minute_ago) then = &s;
  }
  const double elapsed_s =
      std::max(1e-9, static_cast<double>(now.mono_ns - then->mono_ns) * 1e-9);

  out->set_silo(silo_->name());
  out->set_version(kVersion);
  out->set_gateway(gateway_address_);
  out->set_uptime_s(
      absl::ToDoubleSeconds(absl::Now() - silo_->internals().start_time()));
  out->set_sample_period_s(absl::ToDoubleSeconds(period_));
  out->set_activations(static_cast<double>(silo_->ActivationCount()));
  out->set_gateway_connections(
      silo_->internals().metrics().gateway_connections->Value());
  out->set_resident_bytes(static_cast<double>(metrics::ResidentBytes()));

  FillSilos(clustered ? &membership : nullptr, out);
  FillTypes(out);
  FillMethods(now, *then, elapsed_s, out);
  for (size_t i = 1; i < history.size(); ++i) {
    const double dt =
        static_cast<double>(history[i].mono_ns - history[i - 1].mono_ns) * 1e-9;
    if (dt <= 0) continue;
    out->add_calls_per_second(
        static_cast<double>(history[i].calls - history[i - 1].calls) / dt);
  }
}

void AdminHttp::FillSilos(const v1::MembershipView* membership,
                          v1::Overview* out) {
  if (membership != nullptr) {
    for (const v1::Member& m : membership->members()) {
      v1::SiloRow* row = out->add_silos();
      row->set_name(absl::StrCat(m.address(), "@", m.generation()));
      row->set_address(m.gateway());
      std::string status =
          absl::AsciiStrToLower(v1::MemberStatus_Name(m.status()));
      if (absl::StartsWith(status, "member_")) status = status.substr(7);
      row->set_status(status);
      row->set_types(HostedTypesText(m));
      row->set_labels(LabelsText(m));
      row->set_load(LoadText(m));
      const bool me = row->name() == silo_->name();
      row->set_activations(me ? static_cast<double>(silo_->ActivationCount())
                              : static_cast<double>(m.activations()));
    }
  } else {
    v1::SiloRow* row = out->add_silos();
    row->set_name(silo_->name());
    row->set_address(gateway_address_);
    row->set_status(silo_->internals().stopping() ? "shutting_down" : "active");
    row->set_activations(static_cast<double>(silo_->ActivationCount()));
  }
}

void AdminHttp::FillTypes(v1::Overview* out) {
  std::vector<Runtime::TypeView> types = silo_->internals().TypeViews();
  std::sort(types.begin(), types.end(),
            [](const Runtime::TypeView& a, const Runtime::TypeView& b) {
              return a.interface->type_name < b.interface->type_name;
            });
  for (const Runtime::TypeView& t : types) {
    v1::TypeRow* tr = out->add_types();
    tr->set_type(std::string(t.interface->type_name));
    tr->set_activations(t.metrics->activations->Value());
    tr->set_created_total(static_cast<double>(t.metrics->created->Value()));
    double deactivated = 0;
    for (const metrics::Counter* c : t.metrics->deactivated) {
      deactivated += static_cast<double>(c->Value());
    }
    tr->set_deactivated_total(deactivated);
  }
}

void AdminHttp::FillMethods(const Sample& now, const Sample& then,
                            double elapsed_s, v1::Overview* out) {
  std::map<std::string, double> errors_by_code;
  for (size_t i = 0; i < keys_.size(); ++i) {
    const MethodSample& a = now.methods[i];
    const MethodSample* b =
        i < then.methods.size() ? &then.methods[i] : nullptr;
    std::vector<uint64_t> delta(a.buckets.size(), 0);
    for (size_t j = 0; j < a.buckets.size(); ++j) {
      delta[j] = a.buckets[j] - (b != nullptr ? b->buckets[j] : 0);
    }
    const uint64_t calls = a.count - (b != nullptr ? b->count : 0);
    uint64_t errors_total = 0, errors_recent = 0;
    for (int c = 0; c < kCodes; ++c) {
      errors_total += a.errors[c];
      const uint64_t recent = a.errors[c] - (b != nullptr ? b->errors[c] : 0);
      errors_recent += recent;
      if (recent > 0) {
        errors_by_code[absl::StatusCodeToString(
            static_cast<absl::StatusCode>(c))] += static_cast<double>(recent);
      }
    }
    if (a.count == 0 && errors_total == 0) continue;  // never called
    v1::MethodRow* mr = out->add_methods();
    mr->set_type(keys_[i].type);
    mr->set_method(keys_[i].method);
    mr->set_calls_per_s(static_cast<double>(calls) / elapsed_s);
    mr->set_p50_ms(Quantile(0.50, bounds_, delta) * 1e3);
    mr->set_p99_ms(Quantile(0.99, bounds_, delta) * 1e3);
    mr->set_errors_last_minute(static_cast<double>(errors_recent));
    mr->set_calls_total(static_cast<double>(a.count));
    mr->set_errors_total(static_cast<double>(errors_total));
  }
  for (const auto& [code, count] : errors_by_code) {
    v1::ErrorRow* er = out->add_errors();
    er->set_code(code);
    er->set_count(count);
  }
}

std::string AdminHttp::OverviewJson() {
  v1::Overview overview;
  Fill(&overview);
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(overview, &json, options);
  return json;
}

}  // namespace granary::silo
