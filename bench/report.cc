#include "bench/report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "bench/profile.h"
#include "bench/report.pb.h"
#include "bench/stats.h"
#include "google/protobuf/util/json_util.h"

namespace granary::bench {

Report::Report(std::string arm) : report_(std::make_unique<BenchReport>()) {
  report_->set_arm(std::move(arm));
}

Report::~Report() = default;

void Report::SetEnv(const std::string& key, const std::string& value) {
  (*report_->mutable_env())[key] = value;
}

void Report::PrintResult(const std::string& mode, const ScenarioResult& r) {
  const double rate = r.seconds > 0 ? r.ops / r.seconds : 0;
  std::printf(
      "RESULT scenario=%s mode=%s ops=%lld seconds=%.4f rate=%.0f "
      "p50_us=%.2f p99_us=%.2f verified=%s errors=%lld rss_delta_kb=%lld%s%s\n",
      r.scenario.c_str(), mode.c_str(), static_cast<long long>(r.ops),
      r.seconds, rate, r.p50_ns / 1000.0, r.p99_ns / 1000.0,
      r.verified ? "true" : "false", static_cast<long long>(r.errors),
      static_cast<long long>(r.rss_delta_bytes / 1024),
      r.concurrency > 0 ? absl::StrCat(" concurrency=", r.concurrency).c_str()
                        : "",
      r.failure.empty() ? ""
                        : absl::StrCat(" failure=\"", r.failure, "\"").c_str());
  std::fflush(stdout);
}

int64_t Report::Summarize(const std::string& mode, const std::string& scenario,
                          const std::vector<ScenarioResult>& rounds,
                          const std::string& unit) {
  std::vector<double> rates;
  std::vector<int64_t> samples, p50s, p99s;
  int64_t ops = 0, errors = 0, rss = 0;
  LoadUse load;
  bool verified = !rounds.empty();
  ScenarioSummary* s = report_->add_summaries();
  for (const ScenarioResult& r : rounds) {
    rates.push_back(r.seconds > 0 ? r.ops / r.seconds : 0);
    samples.insert(samples.end(), r.latencies_ns.begin(), r.latencies_ns.end());
    p50s.push_back(r.p50_ns);
    p99s.push_back(r.p99_ns);
    s->add_round_p50_us(r.p50_ns / 1000.0);
    if (r.balance > 0) s->add_round_balance(r.balance);
    ops += r.ops;
    errors += r.errors;
    rss += r.rss_delta_bytes;
    load.Add(r.load);
    verified = verified && r.verified;
    if (!r.failure.empty()) s->add_failures(r.failure);
  }
  RateSummary rs = ::granary::bench::Summarize(rates);
  // Pooled nearest-rank percentiles where samples exist; otherwise (e.g.
  // one-way delivery, measured by the receiver) the median round p50 and
  // the worst round p99.
  const int64_t p50 =
      samples.empty() ? NearestRank(p50s, 0.5) : NearestRank(samples, 0.5);
  const int64_t p99 =
      samples.empty()
          ? (p99s.empty() ? 0 : *std::max_element(p99s.begin(), p99s.end()))
          : NearestRank(samples, 0.99);
  const int concurrency = rounds.empty() ? 0 : rounds.front().concurrency;
  s->set_scenario(scenario);
  s->set_mode(mode);
  s->set_rounds(static_cast<int32_t>(rounds.size()));
  s->set_ops(ops);
  s->set_mean_rate(rs.mean);
  s->set_min_rate(rs.min);
  s->set_max_rate(rs.max);
  s->set_spread_pct(rs.mean > 0 ? 100.0 * rs.stddev / rs.mean : 0);
  s->set_p50_us(p50 / 1000.0);
  s->set_p99_us(p99 / 1000.0);
  s->set_samples(static_cast<int64_t>(samples.size()));
  s->set_errors(errors);
  s->set_rss_delta_kb(rss / 1024);
  s->set_verified(verified);
  s->set_concurrency(concurrency);
  s->set_unit(unit);
  s->set_other_cores(load.OtherCores());
  s->set_steal_cores(load.StealCores());
  std::printf(
      "SUMMARY scenario=%s mode=%s rounds=%zu ops=%lld mean_rate=%.0f "
      "min_rate=%.0f max_rate=%.0f spread_pct=%.1f p50_us=%.2f p99_us=%.2f "
      "samples=%zu errors=%lld rss_delta_kb=%lld other_cores=%.2f "
      "steal_cores=%.2f verified=%s%s\n",
      scenario.c_str(), mode.c_str(), rounds.size(),
      static_cast<long long>(ops), rs.mean, rs.min, rs.max, s->spread_pct(),
      p50 / 1000.0, p99 / 1000.0, samples.size(),
      static_cast<long long>(errors), static_cast<long long>(rss / 1024),
      s->other_cores(), s->steal_cores(), verified ? "true" : "false",
      concurrency > 0 ? absl::StrCat(" concurrency=", concurrency).c_str()
                      : "");
  std::fflush(stdout);
  return p50;
}

double Report::MedianRoundRatio(const std::vector<ScenarioResult>& a,
                                const std::vector<ScenarioResult>& b) {
  if (a.empty() || a.size() != b.size()) return 0;
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].p50_ns <= 0 || b[i].p50_ns <= 0) return 0;
    ratios.push_back(static_cast<double>(a[i].p50_ns) / b[i].p50_ns);
  }
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  return n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
}

void Report::PrintPairRatios(
    const std::map<std::string, std::vector<ScenarioResult>>& results) const {
  auto pooled_p50 = [this](const std::string& scenario) -> double {
    for (const ScenarioSummary& s : report_->summaries()) {
      if (s.scenario() == scenario) return s.p50_us();
    }
    return 0;
  };
  // The filter goal: the filtered silo over its unfiltered twin (or over
  // the main silo when the twin did not run). The twin over the main silo
  // is an A/A check: how far two silos without filters differ.
  auto print_ratio = [&](const std::string& over, const std::string& under) {
    auto a = results.find(over);
    auto b = results.find(under);
    if (a == results.end() || b == results.end()) return;
    const double a_us = pooled_p50(over), b_us = pooled_p50(under);
    if (b_us <= 0) return;
    std::printf(
        "RATIO %s_p50_over_%s_p50=%.3f median_round_ratio=%.3f %s_p50_us=%.2f "
        "%s_p50_us=%.2f\n",
        over.c_str(), under.c_str(), a_us / b_us,
        MedianRoundRatio(a->second, b->second), over.c_str(), a_us,
        under.c_str(), b_us);
  };
  for (const std::string s : {"ask", "chain"}) {
    const std::string unfiltered = s + "_unfiltered";
    print_ratio(s + "_filtered", results.contains(unfiltered) ? unfiltered : s);
    print_ratio(unfiltered, s);
  }
  if (results.contains("hotspot") && results.contains("stateless")) {
    const double hot = MeanRate("hotspot");
    const double stateless = MeanRate("stateless");
    std::printf(
        "RATIO stateless_rate_over_hotspot_rate=%.2f stateless_rate=%.0f "
        "hotspot_rate=%.0f\n",
        hot > 0 ? stateless / hot : 0, stateless, hot);
  }
}

void Report::AddProfile(const std::string& mode,
                        const ScenarioProfile& profile) {
  const double ops = profile.ops > 0 ? static_cast<double>(profile.ops) : 1;
  for (const SideProfile& side : profile.sides) {
    ProfileRow* p = report_->add_profile();
    p->set_scenario(profile.scenario);
    p->set_mode(mode);
    p->set_side(side.side.name);
    p->set_ops(profile.ops);
    p->set_verified(profile.verified);
    p->set_voluntary_cs_per_op(side.delta.voluntary / ops);
    p->set_involuntary_cs_per_op(side.delta.involuntary / ops);
    p->set_cpu_us_per_op(side.delta.cpu_us / ops);
    p->set_syscalls_per_op(side.syscalls < 0 ? -1 : side.syscalls / ops);
    p->set_futex_per_op(side.futex < 0 ? -1 : side.futex / ops);
    p->set_note(side.note);
    for (const HotSymbol& h : side.hot) {
      HotFunction* out = p->add_hot();
      out->set_percent(h.percent);
      out->set_dso(h.dso);
      out->set_symbol(h.symbol);
      out->set_samples(h.samples);
    }
    p->set_samples(side.samples);
  }
}

double Report::MeanRate(const std::string& scenario) const {
  for (const ScenarioSummary& s : report_->summaries()) {
    if (s.scenario() == scenario) return s.mean_rate();
  }
  return 0;
}

absl::Status Report::WriteJson(const std::string& path) const {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto status =
      google::protobuf::util::MessageToJsonString(*report_, &json, options);
  if (!status.ok()) return absl::InternalError(status.message().as_string());
  std::ofstream out(path, std::ios::trunc);
  out << json;
  out.close();
  if (!out) {
    return absl::UnavailableError(
        absl::StrCat("cannot write --json file '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace granary::bench
