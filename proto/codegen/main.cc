// protoc-gen-granary: the protoc plugin entry point.
//   protoc -I. --plugin=protoc-gen-granary=... --granary_out=OUT counter.proto
#include "google/protobuf/compiler/plugin.h"
#include "proto/codegen/generator.h"

int main(int argc, char* argv[]) {
  granary::codegen::GrainGenerator generator;
  return google::protobuf::compiler::PluginMain(argc, argv, &generator);
}
