// File: proto/codegen/interface_check.h
// -----------------------------------------------------------------------------
// The breaking-change check of grain interfaces (docs/upgrades.md): compares
// the next release of a grain interface with the previous one and lists each
// change that silos and clients of the two releases would misread, one line
// a problem, naming the service, method, message and field number.
//
//   std::vector<std::string> problems = CheckInterface(*old_service,
//                                                       *new_service);
//   for (const std::string& p : CheckFile(*old_file, *new_file->pool())) ...
//
// The rules are the protobuf wire format's and the gateway protocol's: a
// method is called by name ("/pkg.Service/Method"), requests and replies are
// serialized messages whose fields are known by number.
//
// Breaking, so refused unless GrainOptions.version goes up:
//   - a method removed or renamed; its request or response type changed
//     (another full name, or a breaking change inside the message);
//   - a field's number or type changed (beyond the compatible groups
//     int32/uint32/int64/uint64/bool/enum, sint32/sint64, fixed32/sfixed32,
//     fixed64/sfixed64 and string/bytes), or singular/repeated/map changed
//     (singular <-> repeated is fine for string, bytes and messages);
//   - a field removed without `reserved` on its number, or a reserved
//     number used again;
//   - one_way, read_only, always_interleave or server streaming changed;
//   - the grain options stateless_worker or state changed.
// A new method needs the version to go up too. Always refused: a version
// that goes down, a grain interface removed or no longer a grain.
// Allowed: new fields, renamed fields, new messages and services, comments,
// the other grain options.
//
// Messages are compared field by field, by number, through nested message
// fields (each pair of message types once, so recursive types end).
// Stateless functions; the descriptors are only read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"

namespace granary::codegen {

// Whether `service` carries the (granary.grain) option.
bool IsGrain(const google::protobuf::ServiceDescriptor& service);

// GrainOptions.version of a grain service, 0 read as 1.
uint32_t GrainVersion(const google::protobuf::ServiceDescriptor& service);

// The problems of `updated` as the next release of `baseline`, two grain
// services of the same full name. Empty: compatible.
std::vector<std::string> CheckInterface(
    const google::protobuf::ServiceDescriptor& baseline,
    const google::protobuf::ServiceDescriptor& updated);

// The problems of every grain service of `baseline` (a file's previous
// release) against the service of the same full name in `updated` (the new
// release's pool, so a service may move to another file it holds): each
// one removed or no longer a grain is a problem too.
std::vector<std::string> CheckFile(
    const google::protobuf::FileDescriptor& baseline,
    const google::protobuf::DescriptorPool& updated);

}  // namespace granary::codegen
