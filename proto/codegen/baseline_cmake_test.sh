#!/usr/bin/env bash
# baseline_cmake_test: granary_grain_library(... BASELINE dir) as a project
# using Granary writes it: generation passes a compatible change, fails the
# build naming a breaking one, and a BASELINE that is no directory fails the
# configuration. Only the generation step is built (the Granary targets the
# library links are stand-ins).
#
#   baseline_cmake_test.sh SOURCE_DIR PROTOC_GEN_GRANARY TESTDATA_DIR
set -euo pipefail
usage="usage: baseline_cmake_test.sh SOURCE_DIR PROTOC_GEN_GRANARY TESTDATA_DIR"
source_dir=$(realpath "${1:?$usage}")
plugin=$(realpath "${2:?$usage}")
data=$(realpath "${3:?$usage}")
command -v ninja > /dev/null || { echo "baseline_cmake_test: no ninja" >&2; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $1" >&2
  [[ -f $work/out ]] && cat "$work/out" >&2
  exit 1
}

mkdir -p "$work/project/shop" "$work/old/shop"
cp "$data/baseline.proto" "$work/old/shop/cart.proto"
cp "$data/ok_added_field.proto" "$work/project/shop/cart.proto"
cat > "$work/project/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.25)
project(baseline_cmake_test CXX)
find_package(Protobuf REQUIRED)
add_executable(protoc-gen-granary IMPORTED)
set_target_properties(protoc-gen-granary PROPERTIES IMPORTED_LOCATION "$plugin")
foreach(t granary::core granary::options_proto granary::silo gRPC::grpc++)
  add_library(\${t} INTERFACE IMPORTED)
endforeach()
set(GRANARY_PROTOC_GEN_TARGET protoc-gen-granary)
set(GRANARY_PROTO_DIR "$source_dir/proto")
set(GRANARY_GEN_DIR "\${CMAKE_BINARY_DIR}/gen")
include("$source_dir/cmake/granary_grain_library.cmake")
granary_grain_library(NAME cart PROTOS shop/cart.proto BASELINE "\${BASELINE}")
EOF
configure() {
  cmake -G Ninja -S "$work/project" -B "$work/build" "-DBASELINE=$1" > "$work/out" 2>&1
}
generate() { ninja -C "$work/build" gen/shop/cart.granary.h > "$work/out" 2>&1; }

configure "$work/old" || fail "configuring with BASELINE"
generate || fail "a compatible change failed generation"
[[ -f $work/build/gen/shop/cart.granary.h ]] || fail "nothing generated"

cp "$data/changed_streaming.proto" "$work/project/shop/cart.proto"
if generate; then fail "a breaking change passed generation"; fi
grep -q "check.v1.CartGrain.Watch: server streaming changed from true to false" \
  "$work/out" || fail "the breaking change is not named"

if configure "$work/nowhere"; then fail "a BASELINE that is no directory configured"; fi
# (CMake wraps its messages.)
tr -s ' \n' ' ' < "$work/out" |
  grep -q "BASELINE $work/nowhere is not a directory" ||
  fail "the missing BASELINE is not named"

# Without BASELINE nothing is checked.
configure "" || fail "configuring without BASELINE"
generate || fail "generation without BASELINE failed"
echo "baseline_cmake_test: BASELINE passes a compatible change, fails a breaking one"
