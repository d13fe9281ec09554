// File: proto/codegen/grain_options_check.h
// -----------------------------------------------------------------------------
// How protoc-gen-granary checks a grain's options (GrainOptions, from
// granary/options.proto) and names what it refuses.
//
//   if (!GrainOptionsValid(file, service, options, &error)) return false;
#pragma once

#include <string>

#include "google/protobuf/descriptor.h"
#include "granary/options.pb.h"

namespace granary::codegen {

// "service pkg.S" or "service pkg.S, method M": where an error is (protoc
// prefixes generator errors with the file name).
std::string Where(const google::protobuf::FileDescriptor* file,
                  const google::protobuf::ServiceDescriptor* service,
                  const google::protobuf::MethodDescriptor* method = nullptr);
// The state message of a grain (GrainOptions.state), or null.
const google::protobuf::Descriptor* StateType(
    const google::protobuf::FileDescriptor* file, const GrainOptions& options);
// Whether `o` is valid for `service`; else false with *error set: a state
// message that is not visible, state on a stateless worker,
// max_local_workers without stateless_worker, a placement_filter that does
// not parse (core/labels.h), placement on a stateless worker.
bool GrainOptionsValid(const google::protobuf::FileDescriptor* file,
                       const google::protobuf::ServiceDescriptor* service,
                       const GrainOptions& o, std::string* error);

}  // namespace granary::codegen
