#include "silo/runtime/call_filter.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"

namespace granary::silo {

struct FilterRunDeleter {
  void operator()(FilterRun* run) const { delete run; }
};

namespace {

// The status that ends a call whose filter #`index` threw `thrown`.
absl::Status FilterThrew(size_t index, const CallFilterContext& call,
                         std::exception_ptr thrown) {
  return absl::InternalError(absl::StrCat(
      "call filter #", index, " threw calling ", call.target.ToString(), " ",
      call.method.name, ": ", StatusFromException(thrown).message()));
}

// This thread's spare run: a call through the filters takes it and gives
// it back when its chain ends (on whichever thread that is).
thread_local std::unique_ptr<FilterRun, FilterRunDeleter> spare_run;
}  // namespace

FilterRun* FilterRun::Start(const std::vector<CallFilter>& filters,
                            const GrainId& target, const MethodInfo& method,
                            const GrainId* caller_grain,
                            absl::string_view caller_identity,
                            RequestContext& context, Finish finish, void* owner,
                            CallBase* call, const void* extra) {
  FilterRun* run = spare_run != nullptr ? spare_run.release() : new FilterRun;
  run->filters_ = &filters;
  run->context_.emplace(CallFilterContext{target, method, caller_grain,
                                          caller_identity, context});
  run->finish_ = finish;
  run->owner_ = owner;
  run->call_ = call;
  run->extra_ = extra;
  run->next_ = 0;
  run->status_ = absl::OkStatus();
  run->suspended_ = false;
  return run->Drive() ? nullptr : run;
}

bool FilterRun::Drive() {
  while (next_ < filters_->size() && status_.ok()) {
    const size_t index = next_++;
    Task<absl::Status> task;
    try {
      task = (*filters_)[index](*context_);
    } catch (...) {  // thrown before a coroutine started
      status_ = FilterThrew(index, *context_, std::current_exception());
      break;
    }
    if (!task.valid()) {
      status_ = absl::InternalError(absl::StrCat(
          "call filter #", index, " returned no task calling ",
          context_->target.ToString(), " ", context_->method.name));
      break;
    }
    // Run to its first suspension or its end. A filter that ends there
    // (the usual case) needs no done callback: its frame waits at its final
    // suspend point, and its result is read here.
    Task<absl::Status>::Handle frame = task.Release();
    frame.resume();
    if (!frame.done()) {
      // It suspended: its await resumes it as a later turn of the
      // activation this one runs in, never while this turn runs, so the
      // callback is set before anything can finish it.
      frame_ = frame;
      frame.promise().set_done(&FilterRun::OnFilterDone, this);
      suspended_ = true;
      return false;
    }
    TakeStatus(frame);
  }
  Recycle();
  return true;
}

void FilterRun::TakeStatus(Task<absl::Status>::Handle frame) {
  try {
    status_ = frame.promise().TakeResult();
  } catch (...) {
    status_ = FilterThrew(next_ - 1, *context_, std::current_exception());
  }
  frame.destroy();  // at its final suspend point
}

void FilterRun::OnFilterDone(void* p) {
  // The suspended filter finished in a later turn: go on from here.
  auto* run = static_cast<FilterRun*>(p);
  run->TakeStatus(std::exchange(run->frame_, {}));
  run->Drive();
}

void FilterRun::Recycle() {
  const Finish finish = finish_;
  void* const owner = owner_;
  CallBase* const call = call_;
  const void* const extra = extra_;
  const bool suspended = suspended_;
  absl::Status status = std::move(status_);
  context_.reset();
  // Given back first: the grain method that `finish` starts may call
  // through filters itself.
  if (spare_run == nullptr) {
    spare_run.reset(this);
  } else {
    delete this;
  }
  finish(owner, call, extra, suspended, std::move(status));
}

void FilterRun::Abandon() {
  if (frame_) std::exchange(frame_, {}).destroy();
  context_.reset();
  delete this;
}

}  // namespace granary::silo
