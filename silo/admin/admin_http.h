// File: silo/admin/admin_http.h
// -----------------------------------------------------------------------------
// What a silo serves on its HTTP endpoint besides /healthz:
//   GET /metrics        Prometheus text format 0.0.4 (the silo's registry)
//   GET /api/overview   JSON of granary.v1.Overview
//   (proto/granary/v1/admin.proto) GET /               the dashboard: one
//   self-contained HTML page polling
//                       /api/overview (no build step, no CDN)
//
//   AdminHttp admin(&silo, gateway.address());
//   admin.Register(&http);   // before http.Start()
//   admin.Start();           // samples the silo every second
//
// "Last minute" figures and the 5-minute calls/s series come from samples
// of the silo's metrics taken every `sample_period`, by a timer on the
// silo's timer thread (or a thread of the sampler's own).
//
// Threading: Register/Start/Stop from the owner's thread; handlers and the
// sampler run concurrently and share the samples under a lock.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/sync.h"
#include "core/timer_queue.h"
#include "silo/admin/http_server.h"

namespace granary::v1 {
class MembershipView;
class Overview;
}  // namespace granary::v1

namespace granary::silo {

class Runtime;

class AdminHttp {
 public:
  // `timers`: the silo's timer thread, started and stopped by its owner
  // (null: a thread of the sampler's own).
  AdminHttp(Runtime* silo, std::string gateway_address,
            absl::Duration sample_period = absl::Seconds(1),
            std::shared_ptr<TimerThread> timers = nullptr);
  ~AdminHttp();
  AdminHttp(const AdminHttp&) = delete;
  AdminHttp& operator=(const AdminHttp&) = delete;

  void Register(HttpServer* http);
  // Takes a first sample and starts the sampler.
  absl::Status Start();
  void Stop();

  // Where the overview's silo list comes from (a membership view); unset,
  // this silo alone.
  void SetMembership(std::function<v1::MembershipView()> fn) {
    MutexLock lock(&mu_);
    membership_ = std::move(fn);
  }

  // The overview as served at /api/overview (JSON).
  std::string OverviewJson();
  // Takes a sample now (tests; the sampler does this every period).
  void SampleNow();

 private:
  struct MethodSample {
    std::vector<uint64_t> buckets;  // latency histogram, not cumulative
    uint64_t count = 0;
    std::vector<uint64_t> errors;  // by status code
  };
  struct Sample {
    int64_t mono_ns = 0;
    std::vector<MethodSample> methods;  // in MethodKeys() order
    uint64_t calls = 0;
  };
  struct MethodKey {
    std::string type;
    std::string method;
    const void* metrics;  // MethodMetrics
  };

  Sample Take() const;
  void Fill(v1::Overview* out);
  // The silos (from `membership`, or this silo alone when null), the grain
  // types, and the methods' rates and latencies between `then` and `now`.
  void FillSilos(const v1::MembershipView* membership, v1::Overview* out);
  void FillTypes(v1::Overview* out);
  void FillMethods(const Sample& now, const Sample& then, double elapsed_s,
                   v1::Overview* out);
  // Takes a sample and schedules the next one.
  void OnSample();
  struct Sampler final : TimerEntry {
    AdminHttp* admin;
    void OnTimer() override { admin->OnSample(); }
  };

  Runtime* const silo_;
  const std::string gateway_address_;
  const absl::Duration period_;
  std::vector<MethodKey> keys_;
  std::vector<double> bounds_;

  Mutex mu_;
  std::deque<Sample> samples_ ABSL_GUARDED_BY(mu_);
  std::function<v1::MembershipView()> membership_ ABSL_GUARDED_BY(mu_);
  TimerQueue timers_;
  Sampler sampler_;
  bool started_ = false;
};

// The page served at `/`.
extern const char kDashboardHtml[];

}  // namespace granary::silo
