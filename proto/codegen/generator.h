// File: proto/codegen/generator.h
// -----------------------------------------------------------------------------
// The Granary code generator (run by protoc as `protoc-gen-granary`).
//
// For every `foo.proto` it writes:
//   foo.granary.h/.cc  grain references (`CounterRef`) and the static
//                      InterfaceInfo of each grain type; needs granary::core.
//   foo.grain.h/.cc    grain base classes (`CounterGrainBase`) with pure
//                      virtual coroutine methods and the dispatch table;
//                      needs granary::silo.
// Services without the `(granary.grain)` option are left alone. Misused
// options fail generation with an error naming file, service and method.
#pragma once

#include <string>

#include "google/protobuf/compiler/code_generator.h"
#include "google/protobuf/descriptor.h"

namespace granary::codegen {

class GrainGenerator final : public google::protobuf::compiler::CodeGenerator {
 public:
  bool Generate(const google::protobuf::FileDescriptor* file,
                const std::string& parameter,
                google::protobuf::compiler::GeneratorContext* context,
                std::string* error) const override;
  uint64_t GetSupportedFeatures() const override {
    return FEATURE_PROTO3_OPTIONAL;
  }
};

}  // namespace granary::codegen
