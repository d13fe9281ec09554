#!/usr/bin/env bash
# Every CTest test has a kind label: unit, integration or process (`make
# test-unit` and `ctest -L KIND` pick by it).
#
#   labels_test.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: labels_test.sh BUILD_DIR}
unlabelled=$(ctest --test-dir "$build" -N -LE '^(unit|integration|process)$' |
  sed -n 's/^ *Test *#[0-9]*: //p')
if [ -n "$unlabelled" ]; then
  echo "tests without a unit, integration or process label:" >&2
  echo "$unlabelled" >&2
  exit 1
fi
echo "every test has a kind label"
