// File: proto/codegen/reparse.h
// -----------------------------------------------------------------------------
// Options of a service or method, re-parsed through the generated option
// messages, so the granary extensions are read whatever descriptor pool
// protoc (or a baseline's importer) built them in.
//
//   GrainOptions o = Reparse(service->options()).GetExtension(granary::grain);
#pragma once

namespace granary::codegen {

template <typename Options>
Options Reparse(const Options& in) {
  Options out;
  out.ParseFromString(in.SerializeAsString());
  return out;
}

}  // namespace granary::codegen
