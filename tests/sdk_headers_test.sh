#!/usr/bin/env bash
# sdk_headers_test: the headers granary-dev installs (cmake/sdk.cmake) are
# exactly those the public headers include, directly or not: none missing
# (an installed header that includes one not installed breaks every user),
# none extra (internals stay out of the package).
# Usage: sdk_headers_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
lists="$build/sdk/headers.txt"
[ -s "$lists" ] || { echo "sdk_headers_test: no $lists" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The roots: the public headers, and the generated ones that code generated
# from a user's protos includes (granary/options.pb.h).
awk '$1 == "PUBLIC" || $1 == "GENERATED" {printf "#include \"%s\"\n", $2}' \
  "$lists" >"$work/all.cc"
awk '{print $2}' "$lists" | sort >"$work/installed"
# Every project header the public ones reach (-MG: generated ones that are
# missing are listed rather than an error).
g++ -std=c++20 -MM -MG -I "$src" -I "$build/gen" "$work/all.cc" |
  tr ' \\' '\n\n' | grep -v '^$' | grep -v '^/usr/' | grep -v 'all\.[co]' |
  sed -e "s|^$build/gen/||" -e "s|^$src/||" | sort -u >"$work/reached"
if ! diff -u "$work/installed" "$work/reached" >"$work/diff"; then
  cat "$work/diff" >&2
  echo "sdk_headers_test: cmake/sdk.cmake's header lists differ from what" \
    "the public headers include (- listed, + included)" >&2
  exit 1
fi
echo "sdk_headers_test: $(wc -l <"$work/installed") headers, exactly what" \
  "$(grep -c . "$work/all.cc") public and generated headers include"
