// File: core/version.h
// -----------------------------------------------------------------------------
// Granary's version, reported by silos (Gateway.Status) and the tools.
#pragma once

namespace granary {

inline constexpr char kVersion[] = "0.1.0";

}  // namespace granary
