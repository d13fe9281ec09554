// File: silo/runtime/idle_collection.h
// -----------------------------------------------------------------------------
// The timer entries of the silo's periodic upkeep (idle_collection.cc): idle
// collection and the memory-pressure check. Internal to silo/runtime.
#pragma once

#include "core/timer_queue.h"
#include "silo/runtime/runtime.h"

namespace granary::silo {

class Runtime::IdleCollector final : public TimerEntry {
 public:
  explicit IdleCollector(Runtime* silo) : silo_(silo) {}
  void OnTimer() override { silo_->CollectIdle(); }

 private:
  Runtime* silo_;
};

class Runtime::PressureCheck final : public TimerEntry {
 public:
  explicit PressureCheck(Runtime* silo) : silo_(silo) {}
  void OnTimer() override { silo_->CheckPressure(); }

 private:
  Runtime* silo_;
};

}  // namespace granary::silo
