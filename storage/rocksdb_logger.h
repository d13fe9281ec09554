// File: storage/rocksdb_logger.h
// -----------------------------------------------------------------------------
// A rocksdb::Logger that writes RocksDB's warnings and errors to the silo's
// log (core/log.h, rate-limited) instead of a LOG file in the data
// directory.
//
//   db_options.info_log = NewRocksDbLogger();
#pragma once

#include <memory>

#include "rocksdb/env.h"

namespace granary::storage {

std::shared_ptr<rocksdb::Logger> NewRocksDbLogger();

}  // namespace granary::storage
