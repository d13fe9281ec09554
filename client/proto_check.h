// File: client/proto_check.h
// -----------------------------------------------------------------------------
// `granary proto check`: the breaking-change check of grain interfaces
// (proto/codegen/interface_check.h, docs/upgrades.md) on .proto files
// against their previous release, a directory or a git revision:
//
//   granary proto check --against=v1.4.0 -I proto proto/shop/cart.proto
//   granary proto check --against=../v1.4/proto -I proto proto/shop/cart.proto
//
// Each problem goes to stderr as "FILE: problem"; the exit status is 0 when
// every interface is compatible ("N grain interfaces checked: compatible" on
// stdout), 1 when one is not, 2 for a usage error (no file, no --against, a
// file that does not parse, a revision git does not know).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace granary::cli {

// When "proto" is the command of `granary`'s command line (its first
// argument that is not a flag, --name or --name=value), runs it and returns
// its exit status; else nullopt. The flags before "proto" are parsed as the
// CLI's own; what follows by `proto`'s rules (-I DIR is no Abseil flag).
std::optional<int> RunIfProtoCommand(int argc, char** argv);

// Runs `granary proto ARGS...` (`args`: what follows "proto"); returns the
// exit status.
int RunProtoCommand(const std::vector<std::string>& args);

}  // namespace granary::cli
