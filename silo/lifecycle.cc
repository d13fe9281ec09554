#include "silo/lifecycle.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "core/log.h"

namespace granary::silo {

absl::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kStores:
      return "stores";
    case Stage::kSiloEndpoint:
      return "silo_endpoint";
    case Stage::kRuntime:
      return "runtime";
    case Stage::kCluster:
      return "cluster";
    case Stage::kPeerCalls:
      return "peer_calls";
    case Stage::kListeners:
      return "listeners";
    case Stage::kMembership:
      return "membership";
    case Stage::kClientCalls:
      return "client_calls";
    case Stage::kGrains:
      return "grains";
    case Stage::kHandoff:
      return "handoff";
    case Stage::kActive:
      return "active";
  }
  return "unknown";
}

void Lifecycle::Subscribe(Stage stage, std::string name, StartFn start,
                          StopFn stop) {
  subscribers_.push_back(Subscriber{stage, std::move(name), std::move(start),
                                    std::move(stop),
                                    static_cast<int>(subscribers_.size())});
}

absl::Status Lifecycle::Start() {
  if (started_) return absl::FailedPreconditionError("started already");
  started_ = true;
  // A start may subscribe more, at later stages (a cluster provider, once
  // open, adds the cluster's parts): the next to run is looked up each time.
  std::vector<bool> ran;
  while (true) {
    ran.resize(subscribers_.size(), false);
    int next = -1;
    for (size_t i = 0; i < subscribers_.size(); ++i) {
      if (ran[i]) continue;
      if (next < 0 || subscribers_[i].stage < subscribers_[next].stage) {
        next = static_cast<int>(i);
      }
    }
    if (next < 0) break;
    ran[next] = true;
    const Stage stage = subscribers_[next].stage;
    GRANARY_CHECK(static_cast<int>(stage) >= reached_)
        << "subscribed to stage " << StageName(stage) << " after it ran";
    if (static_cast<int>(stage) > reached_) reached_ = static_cast<int>(stage);
    // Copied: a start that subscribes may move the subscribers.
    const StartFn start = subscribers_[next].start;
    if (!start) continue;
    if (absl::Status status = start(); !status.ok()) {
      GRANARY_LOG(kDebug) << "lifecycle: " << subscribers_[next].name
                          << " failed at stage " << StageName(stage);
      return status;
    }
  }
  return absl::OkStatus();
}

void Lifecycle::Stop() {
  if (stopped_) return;
  stopped_ = true;
  std::vector<Subscriber*> order;
  for (Subscriber& s : subscribers_) order.push_back(&s);
  std::sort(order.begin(), order.end(),
            [](const Subscriber* a, const Subscriber* b) {
              if (a->stage != b->stage) return a->stage > b->stage;
              return a->order > b->order;
            });
  for (Subscriber* s : order) {
    if (s->stop) s->stop();
  }
}

}  // namespace granary::silo
