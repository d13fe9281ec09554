#include "storage/rocksdb_logger.h"

#include <cstdarg>
#include <cstdio>

#include "absl/time/time.h"
#include "core/log.h"

namespace granary::storage {
namespace {

// RocksDB's own log lines go to the silo's log (warnings and errors, at most
// one line a second each), not to a LOG file in the data directory: a full
// disk cannot fail them, and an operator reads one log.
class SiloLogger final : public rocksdb::Logger {
 public:
  SiloLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}

  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char line[1024];
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(line, sizeof(line), format, copy);
    va_end(copy);
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL) {
      GRANARY_LOG_EVERY(kError, absl::Seconds(1)) << "rocksdb: " << line;
    } else {
      GRANARY_LOG_EVERY(kWarning, absl::Seconds(1)) << "rocksdb: " << line;
    }
  }
};

}  // namespace

std::shared_ptr<rocksdb::Logger> NewRocksDbLogger() {
  return std::make_shared<SiloLogger>();
}

}  // namespace granary::storage
