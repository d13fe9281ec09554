// File: core/process.h
// -----------------------------------------------------------------------------
// Process-wide set-up shared by silos and clients. Idempotent and
// thread-safe; Silo and Client call it, so applications need not.
//
// It turns off Mutex deadlock-cycle detection, which Debian's Abseil
// build enables by default and which adds a graph update to every lock.
#pragma once

namespace granary {

void InitProcess();

}  // namespace granary
