// File: silo/runtime/runtime_option_table.h
// -----------------------------------------------------------------------------
// The runtime's options, declared once as X(type, name, default, help) rows:
// they are fields of RuntimeOptions (silo/runtime/runtime.h) and, through the
// host's table (silo/silo_host_option_table.h), of SiloHostOptions and
// granary-silo flags of the same names and defaults. SiloHost copies them row
// by row.
#pragma once

#include <cstdint>

#include "absl/time/time.h"

// clang-format off
#define GRANARY_RUNTIME_OPTIONS(X) \
  X(int32_t, workers, 0, \
    "Worker threads (0: hardware threads).") \
  X(int32_t, turn_budget, 64, \
    "Messages one activation processes per scheduling.") \
  X(bool, network_turns, true, \
    "When every worker sleeps, the gateway thread that read a request " \
    "runs its turn itself (a few turns at most), saving a worker " \
    "wake-up; false: workers run every turn.") \
  X(int32_t, idle_spin, 200, \
    "Empty polls a worker makes before it sleeps (0 to 1000000): " \
    "lower leaves the cores to other work on the machine, higher wakes " \
    "faster.") \
  X(absl::Duration, idle_timeout, absl::Minutes(10), \
    "An activation with no call for this long is deactivated, unless " \
    "its grain type sets its own idle timeout.") \
  X(absl::Duration, collection_period, absl::Seconds(1), \
    "How often idle activations are looked for.") \
  X(absl::Duration, slow_turn_threshold, absl::Milliseconds(100), \
    "A turn holding a worker longer than this is logged (with its grain " \
    "and method) and counted in granary_slow_turns_total.") \
  X(int32_t, max_mailbox, 16384, \
    "Calls queued at one activation past which new requests fail " \
    "RESOURCE_EXHAUSTED; one-way calls are queued and push back on " \
    "their sender's budget instead.") \
  X(absl::Duration, max_pushback_wait, absl::Seconds(1), \
    "How long a one-way sender is held back at most while the target " \
    "activation's mailbox is full (0 to 10m).") \
  X(int64_t, max_activations, 1'000'000, \
    "Activations this silo holds at most: past 90% the least recently " \
    "used idle ones are deactivated down to 80%, and at the limit a " \
    "call that would create one fails RESOURCE_EXHAUSTED.") \
  X(int64_t, memory_limit, 0, \
    "Resident memory in bytes past which idle activations are " \
    "deactivated (least recently used first, a tenth per check) and " \
    "new ones refused with RESOURCE_EXHAUSTED; 0: none. At least 64 " \
    "MiB.") \
  X(absl::Duration, min_reminder_period, absl::Seconds(1), \
    "The shortest period a grain may give a durable reminder " \
    "(e.g. 1s, 500ms, 1m).") \
  X(int32_t, max_reminders_per_grain, 64, \
    "Durable reminders one grain may have; registering one more (a new " \
    "name) fails RESOURCE_EXHAUSTED.") \
  X(int64_t, max_reminders, 100000, \
    "Durable reminders this silo schedules at most; registering one " \
    "more fails RESOURCE_EXHAUSTED. With --min_reminder_period this " \
    "bounds the ticks per second.")
// clang-format on
