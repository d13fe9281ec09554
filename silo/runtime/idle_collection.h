// File: silo/runtime/idle_collection.h
// -----------------------------------------------------------------------------
// The timer entries of the silo's periodic upkeep (idle_collection.cc): idle
// collection and the memory-pressure check. Internal to silo/runtime.
#pragma once

#include "core/timer_queue.h"
#include "silo/runtime/silo.h"

namespace granary::silo {

class Silo::IdleCollector final : public TimerEntry {
 public:
  explicit IdleCollector(Silo* silo) : silo_(silo) {}
  void OnTimer() override { silo_->CollectIdle(); }

 private:
  Silo* silo_;
};

class Silo::PressureCheck final : public TimerEntry {
 public:
  explicit PressureCheck(Silo* silo) : silo_(silo) {}
  void OnTimer() override { silo_->CheckPressure(); }

 private:
  Silo* silo_;
};

}  // namespace granary::silo
