// File: bench/hosted_arm.h
// -----------------------------------------------------------------------------
// granary-bench --hosted: a silo in the benchmark process, with BenchGrain
// and StateGrain, whose grain storage is RocksDB (sync writes, in a fresh
// temporary directory removed afterwards), memory, or PostgreSQL
// (--storage=postgres: the database migrated first, a cluster id of the
// run's own whose rows are deleted afterwards, and, for `postgres_floor`,
// pgbench on the same database: bench/postgres_floor.h).
//
//   std::unique_ptr<Arm> arm = MakeHostedArm(config);   // bench/arm.h
//
// Threading: Start and Finish run on the benchmark's thread; the silo runs
// the grains on its workers.
#pragma once

#include <memory>

#include "bench/arm.h"

namespace granary::bench {

// `config` must outlive the arm.
std::unique_ptr<Arm> MakeHostedArm(const RunConfig& config);

}  // namespace granary::bench
