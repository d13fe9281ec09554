#include "examples/bench_grain.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/clock.h"
#include "core/percentile.h"
#include "core/when_all.h"
#include "silo/runtime/runtime.h"

namespace granary::bench {

void BenchStats::OnActivate() {
  activations_.fetch_add(1, std::memory_order_relaxed);
}

void BenchStats::OnDeactivate() {
  const int64_t n = deactivations_.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (n >= wanted_.load(std::memory_order_seq_cst)) {
    MutexLock lock(&mu_);
    reached_.SignalAll();
  }
}

int64_t BenchStats::activations() const {
  return activations_.load(std::memory_order_acquire);
}

int64_t BenchStats::deactivations() const {
  return deactivations_.load(std::memory_order_acquire);
}

bool BenchStats::WaitForDeactivations(int64_t n, absl::Duration limit) {
  for (int i = 0; i < 2000; ++i) {  // usually done within microseconds
    if (deactivations_.load(std::memory_order_acquire) >= n) return true;
    internal::CpuRelax();
  }
  const absl::Time give_up = absl::Now() + limit;
  MutexLock lock(&mu_);
  wanted_.store(n, std::memory_order_seq_cst);
  // Deactivations that saw the old `wanted_` signalled nobody; re-check the
  // count under the lock before each wait (signals also take the lock).
  bool ok = true;
  while (deactivations_.load(std::memory_order_seq_cst) < n) {
    if (reached_.WaitWithDeadline(&mu_, give_up)) {
      ok = deactivations_.load(std::memory_order_seq_cst) >= n;
      break;
    }
  }
  wanted_.store(INT64_MAX, std::memory_order_seq_cst);
  return ok;
}

Task<void> BenchGrainImpl::OnActivate() {
  stats_->OnActivate();
  co_return;
}

Task<void> BenchGrainImpl::OnDeactivate() {
  stats_->OnDeactivate();
  co_return;
}

Task<PingReply> BenchGrainImpl::Ping(const PingRequest& request) {
  PingReply reply;
  reply.set_seq(request.seq());
  co_return reply;
}

Task<void> BenchGrainImpl::Tell(const TellRequest& request) {
  count_ += request.amount();
  ++tells_;
  if (request.sent_ns() != 0) {
    latencies_ns_.push_back(absl::GetCurrentTimeNanos() - request.sent_ns());
  }
  co_return;
}

Task<CountReply> BenchGrainImpl::Count(const CountRequest& request) {
  CountReply reply;
  reply.set_count(count_);
  reply.set_tells(tells_);
  reply.set_balls(balls_);
  if (!latencies_ns_.empty()) {
    reply.set_p50_ns(NearestRank(latencies_ns_, 0.50));
    reply.set_p99_ns(NearestRank(latencies_ns_, 0.99));
  }
  if (request.reset()) {
    count_ = tells_ = balls_ = 0;
    latencies_ns_.clear();
  }
  co_return reply;
}

Task<ChainReply> BenchGrainImpl::Chain(const ChainRequest& request) {
  ChainReply reply;
  if (request.depth() <= 0) co_return reply;
  ChainRequest next;
  next.set_depth(request.depth() - 1);
  std::string key = request.path().empty()
                        ? absl::StrCat(GetGrainId().key(), "/", next.depth())
                        : request.path(0);
  if (request.path_size() > 1) {
    next.mutable_path()->Add(request.path().begin() + 1, request.path().end());
  }
  ChainReply below =
      co_await GetGrain<BenchGrainRef>(std::move(key)).Chain(next);
  reply.set_depth_reached(below.depth_reached() + 1);
  co_return reply;
}

Task<PingPongReply> BenchGrainImpl::PingPong(const PingPongRequest& request) {
  PingPongReply reply;
  if (request.exchanges() <= 0) co_return reply;
  BallRequest ball;
  ball.set_origin(GetGrainId().key());
  ball.set_from(GetGrainId().key());
  ball.set_remaining(request.exchanges() - 1);
  GetGrain<BenchGrainRef>(request.peer()).Ball(std::move(ball));
  co_await volley_done_;
  reply.set_exchanges(request.exchanges());
  co_return reply;
}

Task<void> BenchGrainImpl::Ball(const BallRequest& request) {
  if (request.remaining() < 0) {  // the volley ended elsewhere
    volley_done_.Set();
    co_return;
  }
  ++balls_;
  const std::string& self = GetGrainId().key();
  if (request.remaining() == 0) {
    if (request.origin() == self) {
      volley_done_.Set();
    } else {
      BallRequest end;
      end.set_remaining(-1);
      GetGrain<BenchGrainRef>(request.origin()).Ball(std::move(end));
    }
    co_return;
  }
  BallRequest next;
  next.set_origin(request.origin());
  next.set_from(self);
  next.set_remaining(request.remaining() - 1);
  GetGrain<BenchGrainRef>(request.from()).Ball(std::move(next));
}

namespace {
void Spin(int64_t work_ns);
}  // namespace

Task<WhereReply> BenchGrainImpl::Where(const WhereRequest& request) {
  if (request.work_ns() > 0) Spin(request.work_ns());
  WhereReply reply;
  reply.set_silo(SiloName());
  reply.set_activation_id(absl::StrCat(ActivationId()));
  co_return reply;
}

Task<FanOutReply> BenchGrainImpl::FanOut(const FanOutRequest& request) {
  std::vector<Task<PingReply>> calls;
  calls.reserve(request.width());
  for (int i = 0; i < request.width(); ++i) {
    PingRequest ping;
    ping.set_seq(i);
    calls.push_back(
        GetGrain<BenchGrainRef>(absl::StrCat(GetGrainId().key(), "-leaf-", i))
            .Ping(ping));
  }
  std::vector<absl::StatusOr<PingReply>> replies =
      co_await WhenAll(std::move(calls));
  FanOutReply reply;
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].ok() && replies[i]->seq() == static_cast<int64_t>(i)) {
      reply.set_replies(reply.replies() + 1);
    }
  }
  co_return reply;
}

Task<LifecycleReply> BenchGrainImpl::Lifecycle(const LifecycleRequest&) {
  LifecycleReply reply;
  reply.set_activations(stats_->activations());
  reply.set_deactivations(stats_->deactivations());
  co_return reply;
}

Task<google::protobuf::Empty> BenchGrainImpl::Deactivate(
    const DeactivateRequest&) {
  DeactivateOnIdle();
  co_return google::protobuf::Empty();
}

Task<void> StateGrainImpl::OnActivate() {
  stats_->OnActivate();
  co_return;
}

Task<void> StateGrainImpl::OnDeactivate() {
  stats_->OnDeactivate();
  co_return;
}

Task<StateReply> StateGrainImpl::Write(const StateRequest& request) {
  state_.set_value(request.value());
  state_.set_pad(request.pad());
  co_await WriteState();
  StateReply reply;
  reply.set_value(state_.value());
  co_return reply;
}

Task<StateReply> StateGrainImpl::Read(const StateRequest&) {
  StateReply reply;
  reply.set_value(state_.value());
  co_return reply;
}

Task<google::protobuf::Empty> StateGrainImpl::Deactivate(
    const DeactivateRequest&) {
  DeactivateOnIdle();
  co_return google::protobuf::Empty();
}

Task<LifecycleReply> StateGrainImpl::Lifecycle(const LifecycleRequest&) {
  LifecycleReply reply;
  reply.set_activations(stats_->activations());
  reply.set_deactivations(stats_->deactivations());
  co_return reply;
}

namespace {

LifecycleReply CountsOf(const BenchStats& stats) {
  LifecycleReply reply;
  reply.set_activations(stats.activations());
  reply.set_deactivations(stats.deactivations());
  return reply;
}

}  // namespace

Task<LifecycleReply> SiloStatsImpl::BenchLifecycle(const LifecycleRequest&) {
  co_return CountsOf(*bench_);
}

Task<LifecycleReply> SiloStatsImpl::StateLifecycle(const LifecycleRequest&) {
  co_return CountsOf(*state_);
}

namespace {

// Spins for `work_ns` of this thread's time, as a grain that computes would.
void Spin(int64_t work_ns) {
  const int64_t until = MonoNanos() + std::min<int64_t>(work_ns, 10'000'000);
  while (MonoNanos() < until) internal::CpuRelax();
}

// Work's reply, once the work is done.
WorkReply DoWork(const WorkRequest& request, uint64_t activation_id) {
  Spin(request.work_ns());
  WorkReply reply;
  reply.set_seq(request.seq());
  reply.set_activation_id(activation_id);
  return reply;
}

}  // namespace

Task<WorkReply> WorkGrainImpl::Work(const WorkRequest& request) {
  co_return DoWork(request, ActivationId());
}

Task<WorkReply> StatelessWorkGrainImpl::Work(const WorkRequest& request) {
  co_return DoWork(request, ActivationId());
}

namespace {

// A balance scenario call's reply, once its work is done.
WhereReply WorkHere(const WhereRequest& request, const std::string& silo,
                    uint64_t activation_id) {
  Spin(request.work_ns());
  WhereReply reply;
  reply.set_silo(silo);
  reply.set_activation_id(absl::StrCat(activation_id));
  return reply;
}

}  // namespace

Task<WhereReply> BalancedGrainImpl::Where(const WhereRequest& request) {
  co_return WorkHere(request, SiloName(), ActivationId());
}

Task<WhereReply> ScatteredGrainImpl::Where(const WhereRequest& request) {
  co_return WorkHere(request, SiloName(), ActivationId());
}

Task<WhereReply> HotGrainImpl::Where(const WhereRequest& request) {
  co_return WorkHere(request, SiloName(), ActivationId());
}

Task<TouchReply> TinyGrainImpl::Touch(const TouchRequest&) {
  TouchReply reply;
  reply.set_touches(++touches_);
  co_return reply;
}

absl::Status AddBenchGrains(silo::Runtime& silo, BenchStats* stats,
                            BenchStats* state_stats) {
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<WorkGrainImpl>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<TinyGrainImpl>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<StatelessWorkGrainImpl>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<BalancedGrainImpl>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<ScatteredGrainImpl>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<HotGrainImpl>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<BenchGrainImpl>(
      [stats] { return std::make_unique<BenchGrainImpl>(stats); }));
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<SiloStatsImpl>([stats, state_stats] {
    return std::make_unique<SiloStatsImpl>(stats, state_stats);
  }));
  return silo.AddGrain<StateGrainImpl>(
      [state_stats] { return std::make_unique<StateGrainImpl>(state_stats); });
}

}  // namespace granary::bench
