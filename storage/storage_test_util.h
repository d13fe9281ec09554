// File: storage/storage_test_util.h
// -----------------------------------------------------------------------------
// What the storage tests share: a fresh directory per test, and each store
// operation run to its end on the test's thread.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/grain_id.h"
#include "core/testing/run_task.h"
#include "storage/grain_storage.h"

namespace granary::storage {

inline constexpr absl::string_view kType = "test.Account";

inline std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             absl::StrCat("granary-storage-test-", getpid(), "-", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline absl::StatusOr<StoredState> ReadNow(GrainStorage& s, const GrainId& id) {
  return RunTask(s.Read(id));
}

inline absl::StatusOr<std::string> WriteNow(GrainStorage& s, const GrainId& id,
                                            std::string bytes,
                                            std::string etag) {
  return RunTask(s.Write(id, std::move(bytes), std::move(etag)));
}

inline absl::Status ClearNow(GrainStorage& s, const GrainId& id,
                             std::string etag) {
  return RunTask(s.Clear(id, std::move(etag))).status();
}

}  // namespace granary::storage
