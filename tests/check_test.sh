#!/usr/bin/env bash
# check_test: scripts/check.sh fails a tree with an unformatted C++ file or
# a file over 600 lines, naming each, and passes the same tree once fixed.
#
#   check_test.sh SOURCE_ROOT
set -euo pipefail
root=${1:?usage: check_test.sh SOURCE_ROOT}
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/scripts" "$tree/tests" "$tree/core"
cp "$root/scripts/check.sh" "$tree/scripts/"
cp "$root/tests/layering_test.sh" "$tree/tests/"
cp "$root/.clang-format" "$tree/"
for d in rpc directory storage silo silo/runtime silo/gateway silo/cluster silo/admin client; do
  mkdir -p "$tree/$d"
done
printf 'int   main( ){return 0;}\n' > "$tree/core/ugly.cc"
for i in $(seq 1 601); do echo "x = $i"; done > "$tree/core/long.py"
if out=$(bash "$tree/scripts/check.sh" 2>&1); then
  echo "FAIL: check.sh passed a bad tree:"; echo "$out"; exit 1
fi
for want in "core/ugly.cc" "core/long.py: 601"; do
  [[ $out == *"$want"* ]] || { echo "FAIL: no '$want' in:"; echo "$out"; exit 1; }
done
clang-format -i "$tree/core/ugly.cc"
sed -i '601d' "$tree/core/long.py"
out=$(bash "$tree/scripts/check.sh" 2>&1) || { echo "FAIL: a fixed tree failed:"; echo "$out"; exit 1; }
echo "check.sh refuses an unformatted and a long file, and passes them fixed"
