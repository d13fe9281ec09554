// protoc-gen-granary: the protoc plugin entry point.
//   protoc -I. --plugin=protoc-gen-granary=... --granary_out=OUT counter.proto
// With --granary_opt=baseline=OLD_ROOT, each file is first checked against
// its previous release (baseline_generator.h).
#include "google/protobuf/compiler/plugin.h"
#include "proto/codegen/baseline_generator.h"

int main(int argc, char* argv[]) {
  granary::codegen::BaselineCheckingGenerator generator;
  return google::protobuf::compiler::PluginMain(argc, argv, &generator);
}
