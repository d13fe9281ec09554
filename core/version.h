// File: core/version.h
// -----------------------------------------------------------------------------
// Granary's version, reported by silos (Gateway.Status) and the tools, and
// the version a grain library is checked against (silo/grain_library.h).
#pragma once

#define GRANARY_VERSION_STRING "0.1.0"

namespace granary {

inline constexpr char kVersion[] = GRANARY_VERSION_STRING;

}  // namespace granary
