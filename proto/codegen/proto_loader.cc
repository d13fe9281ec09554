#include "proto/codegen/proto_loader.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "granary/options.pb.h"

namespace granary::codegen {

namespace pb = ::google::protobuf;

class ProtoLoader::Errors final : public pb::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column,
                const std::string& message) override {
    // protoc's convention: line and column from 1, -1 when unknown.
    if (line >= 0) {
      lines_.push_back(
          absl::StrCat(file, ":", line + 1, ":", column + 1, ": ", message));
    } else {
      lines_.push_back(absl::StrCat(file, ": ", message));
    }
  }
  void AddWarning(const std::string&, int, int, const std::string&) override {}

  std::vector<std::string> Take() { return std::move(lines_); }

 private:
  std::vector<std::string> lines_;
};

ProtoLoader::ProtoLoader(pb::compiler::SourceTree* tree,
                         pb::DescriptorDatabase* fallback)
    : errors_(std::make_unique<Errors>()), database_(tree, fallback) {
  database_.RecordErrorsTo(errors_.get());
  pool_ = std::make_unique<pb::DescriptorPool>(
      &database_, database_.GetValidationErrorCollector());
  pool_->EnforceWeakDependencies(true);
}

ProtoLoader::~ProtoLoader() = default;

absl::StatusOr<const pb::FileDescriptor*> ProtoLoader::Load(
    absl::string_view name) {
  errors_->Take();
  const pb::FileDescriptor* file = pool_->FindFileByName(std::string(name));
  std::vector<std::string> errors = errors_->Take();
  if (file != nullptr) return file;
  if (errors.empty()) {
    return absl::NotFoundError(absl::StrCat(name, ": not found"));
  }
  if (errors.size() == 1 &&
      errors[0] == absl::StrCat(name, ": File not found.")) {
    return absl::NotFoundError(absl::StrCat(name, ": not found"));
  }
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

pb::DescriptorDatabase* CompiledInDescriptors() {
  // The granary options are referenced here so the linker keeps them, and
  // with them their descriptor, in the program.
  static pb::DescriptorPoolDatabase* db = [] {
    (void)GrainOptions::descriptor();
    return new pb::DescriptorPoolDatabase(
        *pb::DescriptorPool::generated_pool());
  }();
  return db;
}

void MapDirectories(const std::vector<std::string>& dirs,
                    pb::compiler::DiskSourceTree* tree) {
  for (const std::string& dir : dirs) tree->MapPath("", dir);
}

}  // namespace granary::codegen
