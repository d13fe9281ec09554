#!/bin/bash
# bench_bad_flag_*: granary-bench with bad flags exits 2 with a message.
#
#   bad_flag_test.sh EXPECTED_MESSAGE GRANARY_BENCH FLAGS...
#
# With BAD_FLAG_ABSENT set in the environment, that text (a password given
# in a flag) must not be on stderr either.
set -u
expected=$1
shift
err=$("$@" 2>&1 >/dev/null)
rc=$?
echo "$err"
[[ $rc -eq 2 ]] || { echo "FAIL: exit $rc, expected 2" >&2; exit 1; }
[[ $err == *"$expected"* ]] || { echo "FAIL: no '$expected' on stderr" >&2; exit 1; }
absent=${BAD_FLAG_ABSENT:-}
if [[ -n $absent && $err == *"$absent"* ]]; then
  echo "FAIL: '$absent' is on stderr" >&2
  exit 1
fi
