// File: proto/codegen/proto_loader.h
// -----------------------------------------------------------------------------
// Parses .proto files into descriptors, as protoc's Importer does, with a
// fallback for the files no directory holds: the breaking-change check
// (interface_check.h) reads the previous release of a file from one tree and
// the files it imports (granary/options.proto, google/protobuf/...) from
// another, or from the descriptors compiled into the program.
//
//   pb::compiler::DiskSourceTree tree;
//   tree.MapPath("", "old/");
//   ProtoLoader loader(&tree, CompiledInDescriptors());
//   absl::StatusOr<const pb::FileDescriptor*> file = loader.Load("shop.proto");
//
// Not thread-safe: one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/compiler/importer.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor_database.h"

namespace granary::codegen {

class ProtoLoader {
 public:
  // Reads files from `tree`, then `fallback` (null: none). Neither is owned;
  // both outlive the loader.
  ProtoLoader(google::protobuf::compiler::SourceTree* tree,
              google::protobuf::DescriptorDatabase* fallback);
  ~ProtoLoader();

  // The file imported as `name`, with its imports. kInvalidArgument with
  // each parse error as "file:line:col: message" lines; kNotFound when
  // neither the tree nor the fallback holds it.
  absl::StatusOr<const google::protobuf::FileDescriptor*> Load(
      absl::string_view name);

  const google::protobuf::DescriptorPool& pool() const { return *pool_; }

 private:
  class Errors;
  std::unique_ptr<Errors> errors_;
  google::protobuf::compiler::SourceTreeDescriptorDatabase database_;
  std::unique_ptr<google::protobuf::DescriptorPool> pool_;
};

// The descriptors compiled into this program (granary/options.proto,
// google/protobuf's), as a fallback for ProtoLoader. Never null.
google::protobuf::DescriptorDatabase* CompiledInDescriptors();

// Maps each of `dirs` to the root of `tree`, in order (the first holding a
// file wins), as protoc's -I does.
void MapDirectories(const std::vector<std::string>& dirs,
                    google::protobuf::compiler::DiskSourceTree* tree);

}  // namespace granary::codegen
