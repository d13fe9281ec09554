#!/bin/bash
# bench_smoke_script_test: smoke_test.sh fails a run that prints a verified
# summary and then crashes, and one with an unverified row; it passes a
# clean run.
#
#   smoke_test_test.sh SMOKE_TEST_SH
set -u
smoke=$1
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
summary='echo "SUMMARY scenario=ask verified=true"'
out=$(/bin/bash "$smoke" 'SUMMARY scenario=ask.*verified=true' \
      /bin/bash -c "$summary; kill -SEGV \$\$" 2>&1)
rc=$?
[[ $rc -ne 0 ]] || fail "a crash after the summary passed: $out"
[[ $out == *"exited with status 139"* ]] || fail "no exit status reported: $out"
out=$(/bin/bash "$smoke" 'SUMMARY scenario=ask.*verified=true' \
      /bin/bash -c "$summary; echo 'SUMMARY scenario=tell verified=false'" 2>&1)
[[ $? -ne 0 ]] || fail "an unverified row passed: $out"
out=$(/bin/bash "$smoke" 'SUMMARY scenario=ask.*verified=true' /bin/bash -c "$summary" 2>&1)
[[ $? -eq 0 ]] || fail "a clean run failed: $out"
echo PASS
