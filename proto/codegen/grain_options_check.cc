#include "proto/codegen/grain_options_check.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/labels.h"

namespace granary::codegen {

namespace pb = ::google::protobuf;

std::string Where(const pb::FileDescriptor* file,
                  const pb::ServiceDescriptor* service,
                  const pb::MethodDescriptor* method) {
  std::string s = absl::StrCat("service ", service->full_name());
  if (method != nullptr) absl::StrAppend(&s, ", method ", method->name());
  return s;
}

// The state message of a grain (GrainOptions.state), or null.
const pb::Descriptor* StateType(const pb::FileDescriptor* file,
                                const GrainOptions& options) {
  if (options.state().empty()) return nullptr;
  return file->pool()->FindMessageTypeByName(options.state());
}

namespace {

// `type` is defined in `file` or a file it imports (so its C++ class is
// declared where the generated code includes).
bool Visible(const pb::FileDescriptor* file, const pb::Descriptor* type) {
  if (type == nullptr) return false;
  if (type->file() == file) return true;
  for (int i = 0; i < file->dependency_count(); ++i) {
    if (file->dependency(i) == type->file()) return true;
  }
  return false;
}

}  // namespace

bool GrainOptionsValid(const pb::FileDescriptor* file,
                       const pb::ServiceDescriptor* service,
                       const GrainOptions& o, std::string* error) {
  if (!o.state().empty() && !Visible(file, StateType(file, o))) {
    *error = absl::StrCat(Where(file, service), ": state message ", o.state(),
                          " is not defined in this file or its imports "
                          "(give its full name, package included)");
    return false;
  }
  if (o.stateless_worker() && !o.state().empty()) {
    *error = absl::StrCat(Where(file, service),
                          ": a stateless_worker cannot declare persistent "
                          "state (state: ",
                          o.state(),
                          "): its activations are many and "
                          "short-lived; keep state in another grain");
    return false;
  }
  if (o.max_local_workers() != 0 && !o.stateless_worker()) {
    *error = absl::StrCat(Where(file, service),
                          ": max_local_workers is set but the grain is not a "
                          "stateless_worker");
    return false;
  }
  if (absl::StatusOr<Labels> filter = ParseLabels(o.placement_filter());
      !filter.ok()) {
    *error = absl::StrCat(Where(file, service),
                          ": placement_filter: ", filter.status().message());
    return false;
  }
  if (o.stateless_worker() && o.placement() != RANDOM) {
    *error = absl::StrCat(Where(file, service),
                          ": a stateless_worker is never placed (it runs on "
                          "the silo that receives the call): drop placement");
    return false;
  }
  return true;
}

}  // namespace granary::codegen
