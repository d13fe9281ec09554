// File: proto/codegen/baseline_generator.h
// -----------------------------------------------------------------------------
// protoc-gen-granary as protoc runs it: the grain code generator
// (generator.h), and before it, when asked, the breaking-change check
// (interface_check.h) of each file against its previous release:
//
//   protoc ... --granary_out=OUT shop/cart.proto
//       --granary_opt=baseline=OLD_ROOT[,baseline_include=DIR1:DIR2]
//
// `baseline` is a proto root holding the previous release's files at the
// same paths (OLD_ROOT/shop/cart.proto). The files a baseline imports are
// read from OLD_ROOT first, then from the `baseline_include` directories,
// then from the files protoc itself parsed and the descriptors compiled into
// the plugin (granary/options.proto, google/protobuf's). A file the
// baseline lacks is new, so compatible. Any problem fails generation, one
// line a problem. Other parameters go to the generator as they are.
// granary_grain_library's BASELINE argument passes `baseline`.
#pragma once

#include <string>

#include "google/protobuf/compiler/code_generator.h"
#include "google/protobuf/descriptor.h"
#include "proto/codegen/generator.h"

namespace granary::codegen {

class BaselineCheckingGenerator final
    : public google::protobuf::compiler::CodeGenerator {
 public:
  bool Generate(const google::protobuf::FileDescriptor* file,
                const std::string& parameter,
                google::protobuf::compiler::GeneratorContext* context,
                std::string* error) const override;
  uint64_t GetSupportedFeatures() const override {
    return generator_.GetSupportedFeatures();
  }

 private:
  GrainGenerator generator_;
};

// The check alone: the problems of `file` against its release under
// `baseline_root` (imports as above; `includes` colon-separated). False with
// `error` set when there are problems or the baseline cannot be read.
bool CheckAgainstBaseline(const google::protobuf::FileDescriptor& file,
                          const std::string& baseline_root,
                          const std::string& includes, std::string* error);

}  // namespace granary::codegen
