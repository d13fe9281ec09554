#!/bin/bash
# The smoke tests of the benchmark binaries: a run passes only when it exits
# 0, its output matches PASS_REGEX, and no row says verified=false. (ctest's
# PASS_REGULAR_EXPRESSION alone ignores the exit code, so a crash after the
# summary would pass.)
#
#   smoke_test.sh PASS_REGEX COMMAND ARGS...
#
# PASS_REGEX is a bash (POSIX extended) regular expression matched against
# stdout and stderr together; `.` matches newlines too.
set -u
pass_regex=$1
shift
out=$("$@" 2>&1)
rc=$?
echo "$out"
[[ $rc -eq 0 ]] || { echo "FAIL: $1 exited with status $rc" >&2; exit 1; }
[[ $out =~ $pass_regex ]] || { echo "FAIL: no match for '$pass_regex'" >&2; exit 1; }
[[ $out != *"verified=false"* ]] || { echo "FAIL: a row is not verified" >&2; exit 1; }
echo "PASS"
