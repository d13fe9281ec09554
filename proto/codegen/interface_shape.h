// File: proto/codegen/interface_shape.h
// -----------------------------------------------------------------------------
// What a grain interface looks like on the wire, for versions and the
// breaking-change check (docs/upgrades.md): its shape is a canonical text of
// every method (name, request and response types, one-way, read-only,
// always-interleave and streaming flags) and of every message the methods
// reach (each field's number, label and type; names are left out, since a
// renamed field reads the same on the wire). Its fingerprint is a 64-bit
// FNV-1a hash of the shape: stable across builds, machines and releases.
//
//   std::string shape = InterfaceShape(*service);
//   uint64_t fingerprint = InterfaceFingerprint(*service);
//
// protoc-gen-granary puts the fingerprint in each InterfaceInfo; silos list
// it in the membership table next to the version.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"

namespace granary::codegen {

std::string InterfaceShape(const google::protobuf::ServiceDescriptor& service);
uint64_t InterfaceFingerprint(
    const google::protobuf::ServiceDescriptor& service);
// FNV-1a 64 of `bytes`.
uint64_t Fnv1a64(absl::string_view bytes);

}  // namespace granary::codegen
