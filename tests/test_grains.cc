#include "tests/test_grains.h"

#include <algorithm>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "examples/counter_grain.h"

namespace granary::testing {

Text MakeText(std::string s) {
  Text t;
  t.set_text(std::move(s));
  return t;
}

namespace {

class ProbeGrain final : public ProbeGrainBase {
 public:
  explicit ProbeGrain(TestState* state) : state_(state) {}
  Task<Text> Echo(const Text& r) override { co_return MakeText(r.text()); }
  Task<Text> Whoami(const Text& r) override {
    if (!r.text().empty()) {
      co_return co_await GetGrain<ProbeRef>(r.text()).Whoami(Text());
    }
    co_return MakeText(std::string(CallerIdentity()));
  }
  Task<Text> Hang(const Text& r) override {
    state_->Record("hang-start:" + GetGrainId().key());
    co_await never_;
    co_return MakeText("unreachable");
  }
  Task<Text> Throw(const ThrowRequest& r) override {
    if (r.code() == 0) throw std::runtime_error(r.message());
    throw StatusError(
        absl::Status(static_cast<absl::StatusCode>(r.code()), r.message()));
    co_return Text();
  }

 private:
  TestState* state_;
  GrainEvent never_;
};

class TurnsGrain final : public TurnsGrainBase {
 public:
  explicit TurnsGrain(TestState* state) : state_(state) {}

  Task<Text> CallPeer(const PeerRequest& r) override {
    PeerRequest back;
    back.set_peer(GetGrainId().key());
    Text t = co_await GetGrain<TurnsRef>(r.peer()).CallBack(back);
    co_return MakeText("peer said " + t.text());
  }
  Task<Text> CallBack(const PeerRequest& r) override {
    Text t = co_await GetGrain<TurnsRef>(r.peer()).Leaf(
        MakeText("from " + GetGrainId().key()));
    co_return MakeText("callback " + t.text());
  }
  Task<Text> Leaf(const Text& r) override {
    state_->Record("leaf");
    co_return MakeText("leaf " + r.text());
  }
  Task<Text> Block(const Text&) override {
    state_->Record("block-start");
    co_await released_;
    state_->Record("block-done");
    co_return MakeText("unblocked");
  }
  Task<Text> Release(const Text&) override {
    state_->Record("release");
    released_.Set();
    read_released_.Set();
    co_return MakeText("released");
  }
  Task<Text> ReadBlock(const Text&) override {
    state_->Record("readblock-start");
    co_await read_released_;
    state_->Record("readblock-done");
    co_return MakeText("read unblocked");
  }
  Task<Text> Read(const Text&) override {
    state_->Record("read");
    co_return MakeText("read");
  }
  Task<Text> Write(const Text&) override {
    state_->Record("write");
    co_return MakeText("write");
  }
  Task<void> Note(const Text& r) override {
    state_->Record("note:" + r.text());
    if (r.text() == "gate") {
      state_->WaitUntil([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return state_->gate_open;
      });
    }
    co_return;
  }
  Task<Text> SendNote(const PeerRequest& r) override {
    GetGrain<TurnsRef>(r.peer()).Note(MakeText("sent"));
    state_->Record("send-note");
    co_return MakeText("sent");
  }
  Task<Text> LeafWithTimeout(const PeerRequest& r) override {
    absl::Status status;
    try {
      co_await GetGrain<TurnsRef>(r.peer()).Leaf(MakeText("timed"),
                                                 CallOptions{absl::Seconds(5)});
    } catch (const StatusError& e) {
      status = e.status();
    }
    state_->Record("leaf-with-timeout:" +
                   std::string(absl::StatusCodeToString(status.code())));
    co_return MakeText(absl::StatusCodeToString(status.code()));
  }

 private:
  TestState* state_;
  GrainEvent released_;
  GrainEvent read_released_;
};

class LifecycleGrain final : public LifecycleGrainBase {
 public:
  explicit LifecycleGrain(TestState* state) : state_(state) {}

  Task<void> OnActivate() override {
    MutexLock lock(&state_->mu);
    ++state_->activations[GetGrainId().key()];
    co_return;
  }
  Task<void> OnDeactivate() override {
    MutexLock lock(&state_->mu);
    ++state_->deactivations[GetGrainId().key()];
    co_return;
  }
  Task<Text> Touch(const Text& r) override {
    if (busy_) ++overlaps_;
    co_return MakeText(r.text());
  }
  Task<Text> StartTimer(const TimerRequest& r) override {
    RegisterTimer([this]() { return Tick(); },
                  absl::Milliseconds(r.period_ms()),
                  absl::Milliseconds(r.period_ms()));
    co_return MakeText("started");
  }
  Task<TimerStats> Stats(const Text&) override {
    TimerStats s;
    s.set_ticks(ticks_);
    s.set_overlaps(overlaps_);
    co_return s;
  }
  Task<Text> Deactivate(const Text&) override {
    DeactivateOnIdle();
    co_return MakeText("bye");
  }

 private:
  Task<void> Tick() {
    if (busy_) ++overlaps_;
    busy_ = true;
    ++ticks_;
    // Suspend mid-tick: requests and later ticks must wait for this turn.
    co_await GetGrain<ProbeRef>("tick-probe").Echo(MakeText("tick"));
    busy_ = false;
    MutexLock lock(&state_->mu);
    ++state_->ticks;
  }

  TestState* state_;
  bool busy_ = false;
  int64_t ticks_ = 0;
  int64_t overlaps_ = 0;
};

class DriverGrain final : public DriverGrainBase {
 public:
  Task<Text> AddMany(const AddManyRequest& r) override {
    auto counter = GetGrain<examples::CounterRef>(r.counter());
    examples::AddRequest add;
    add.set_amount(1);
    for (int64_t i = 0; i < r.count(); ++i) co_await counter.Add(add);
    co_return MakeText("done");
  }
};

class InterleavedGrain final : public InterleavedGrainBase {
 public:
  explicit InterleavedGrain(TestState* state) : state_(state) {}
  Task<Text> Block(const Text&) override {
    state_->Record("block-start");
    co_await released_;
    state_->Record("block-done");
    co_return MakeText("unblocked");
  }
  Task<Text> Leaf(const Text&) override {
    state_->Record("leaf");
    co_return MakeText("leaf");
  }
  Task<Text> Release(const Text&) override {
    state_->Record("release");
    released_.Set();
    co_return MakeText("released");
  }

 private:
  TestState* state_;
  GrainEvent released_;
};

class FaultyGrain final : public FaultyGrainBase {
 public:
  explicit FaultyGrain(TestState* state) : state_(state) {}
  Task<void> OnActivate() override {
    {
      MutexLock lock(&state_->mu);
      ++state_->activations[GetGrainId().key()];
    }
    if (GetGrainId().key().rfind("bad", 0) == 0) {
      throw std::runtime_error("cannot load " + GetGrainId().key());
    }
    co_return;
  }
  Task<Text> Echo(const Text& r) override { co_return MakeText(r.text()); }

 private:
  TestState* state_;
};

absl::Duration Ms(int64_t ms) { return absl::Milliseconds(ms); }

class RemindGrain final : public RemindGrainBase {
 public:
  explicit RemindGrain(TestState* state) : state_(state) {}
  Task<Text> Register(const ReminderRequest& r) override {
    co_await RegisterReminder(r.name(), Ms(r.due_ms()), Ms(r.period_ms()));
    co_return MakeText("registered");
  }
  Task<Text> Unregister(const ReminderRequest& r) override {
    const bool removed = co_await UnregisterReminder(r.name());
    co_return MakeText(removed ? "removed" : "absent");
  }
  Task<ReminderList> List(const Text&) override {
    ReminderList list;
    const std::vector<ReminderTick> reminders = co_await GetReminders();
    for (const ReminderTick& t : reminders) {
      list.add_names(t.name);
      list.add_period_ms(absl::ToInt64Milliseconds(t.period));
    }
    co_return list;
  }
  Task<Text> Deactivate(const Text&) override {
    DeactivateOnIdle();
    co_return MakeText("bye");
  }
  Task<void> OnDeactivate() override {
    MutexLock lock(&state_->mu);
    ++state_->deactivations[GetGrainId().key()];
    co_return;
  }
  Task<void> ReceiveReminder(const ReminderTick& tick) override {
    MutexLock lock(&state_->mu);
    const std::string key = GetGrainId().key() + "/" + tick.name;
    ++state_->reminder_ticks[key];
    state_->reminder_activations[key].push_back(ActivationId());
    co_return;
  }

 private:
  TestState* state_;
};

class ForgetfulGrain final : public ForgetfulGrainBase {
 public:
  Task<Text> Register(const ReminderRequest& r) override {
    co_await RegisterReminder(r.name(), Ms(r.due_ms()), Ms(r.period_ms()));
    co_return MakeText("registered");
  }
};

}  // namespace

class HotspotGrain final : public HotspotGrainBase {
 public:
  explicit HotspotGrain(TestState* state) : state_(state) {}
  Task<Text> Work(const Text& r) override {
    state_->Record("work-start");
    if (r.text() == "gate") {
      state_->WaitUntil([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return state_->gate_open;
      });
    }
    co_return MakeText(absl::StrCat(ActivationId()));
  }

 private:
  TestState* state_;
};

class StatefulWorkerGrain final : public StatefulWorkerGrainBase {
 public:
  StatefulWorkerGrain() { PersistState(&state_); }
  Task<Text> Work(const Text&) override { co_return MakeText("ran"); }

 private:
  Text state_;
};

class CancellableGrain final : public CancellableGrainBase {
 public:
  explicit CancellableGrain(TestState* state) : state_(state) {}
  Task<Text> Wait(const Text&) override {
    Note("wait");
    co_await CurrentCancellation();
    Note("saw-cancel");
    CurrentCancellation().ThrowIfCancelled();
    co_return MakeText("not cancelled");
  }
  Task<Text> Poll(const Text&) override {
    Note("poll");
    CancellationToken token = CurrentCancellation();
    while (!token.IsCancelled()) absl::SleepFor(absl::Milliseconds(1));
    Note("saw-cancel");
    token.ThrowIfCancelled();
    co_return MakeText("not cancelled");
  }
  Task<Text> Record(const Text& r) override {
    Note("ran " + r.text());
    co_return r;
  }
  Task<Text> Forward(const Text& r) override {
    Note("forward");
    co_return co_await GetGrain<CancellableRef>(r.text()).Wait({});
  }
  Task<Text> Where(const Text&) override { co_return MakeText(SiloName()); }

 private:
  void Note(const std::string& event) {
    state_->Record(GetGrainId().key() + ":" + event);
  }
  TestState* state_;
};

class StreamerGrain final : public StreamerGrainBase {
 public:
  explicit StreamerGrain(TestState* state) : state_(state) {}
  Task<void> Count(const CountRequest& r,
                   StreamWriter<CountItem> out) override {
    absl::Status last;
    for (int i = 0; i < r.n(); ++i) {
      last = co_await out.Write(Item(i, r.pad()));
      if (!last.ok()) break;
      ++written_;
    }
    Note("count-done " + std::string(absl::StatusCodeToString(last.code())));
  }
  Task<void> CountThenFail(const CountRequest& r,
                           StreamWriter<CountItem> out) override {
    for (int i = 0; i < r.n(); ++i) {
      absl::Status s = co_await out.Write(Item(i, r.pad()));
      if (!s.ok()) co_return;
    }
    throw StatusError(absl::FailedPreconditionError("count failed"));
  }
  Task<void> Subscribe(const CountRequest&,
                       StreamWriter<CountItem> out) override {
    subscribers_.Add(std::move(out));
    Note("subscribed");
    co_return;
  }
  Task<Text> Publish(const CountRequest& r) override {
    co_return MakeText(
        absl::StrCat(subscribers_.Publish(Item(r.n(), r.pad()))));
  }
  Task<Text> Stats(const Text&) override {
    co_return MakeText(absl::StrCat("written=", written_,
                                    " subscribers=", subscribers_.Prune()));
  }
  Task<Text> Deactivate(const Text&) override {
    DeactivateOnIdle();
    co_return MakeText("ok");
  }
  Task<Text> Where(const Text&) override { co_return MakeText(SiloName()); }

 private:
  static CountItem Item(int i, int pad) {
    CountItem item;
    item.set_i(i);
    item.set_pad(std::string(static_cast<size_t>(std::max(pad, 0)), 'p'));
    return item;
  }
  void Note(const std::string& event) {
    state_->Record(GetGrainId().key() + ":" + event);
  }
  TestState* state_;
  int64_t written_ = 0;
  ObserverSet<CountItem> subscribers_;
};

ReminderRequest Reminder(std::string name, int64_t due_ms, int64_t period_ms) {
  ReminderRequest r;
  r.set_name(std::move(name));
  r.set_due_ms(due_ms);
  r.set_period_ms(period_ms);
  return r;
}

absl::Status AddTestGrains(silo::Runtime& silo, TestState* state) {
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<ProbeGrain>(
      [state] { return std::make_unique<ProbeGrain>(state); }));
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<TurnsGrain>(
      [state] { return std::make_unique<TurnsGrain>(state); }));
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<LifecycleGrain>(
      [state] { return std::make_unique<LifecycleGrain>(state); }));
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<DriverGrain>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<InterleavedGrain>(
      [state] { return std::make_unique<InterleavedGrain>(state); }));
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<FaultyGrain>(
      [state] { return std::make_unique<FaultyGrain>(state); }));
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<RemindGrain>(
      [state] { return std::make_unique<RemindGrain>(state); }));
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<ForgetfulGrain>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<HotspotGrain>(
      [state] { return std::make_unique<HotspotGrain>(state); }));
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<StatefulWorkerGrain>());
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<CancellableGrain>(
      [state] { return std::make_unique<CancellableGrain>(state); }));
  GRANARY_RETURN_IF_ERROR(silo.AddGrain<StreamerGrain>(
      [state] { return std::make_unique<StreamerGrain>(state); }));
  GRANARY_RETURN_IF_ERROR(examples::AddExampleGrains(silo));
  return absl::OkStatus();
}

}  // namespace granary::testing
