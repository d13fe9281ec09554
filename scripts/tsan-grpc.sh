#!/usr/bin/env bash
# The gRPC-labelled tests under ThreadSanitizer (`make test-tsan-grpc`).
# Debian's gRPC, Protobuf and Abseil libraries are not TSan-instrumented, so
# what they do is invisible to it and their internals report races by the
# thousand. ignore_noninstrumented_modules=1 leaves out the memory accesses
# of their calls into libc (memcpy, free, ...), which removes most of those
# reports and keeps the TSan-built silos fast enough for their failure
# detector; scripts/tsan_grpc_filter.py keeps only the races whose two
# accesses are both in Granary's code. This fails when there is one, or when
# a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-tsan
logs=$(mktemp -d)
status=0
options="halt_on_error=0 report_signal_unsafe=0 ignore_noninstrumented_modules=1 suppressions=$PWD/scripts/tsan.supp"
# report LOG RC: prints a test log's summary, and its failures in full. A
# binary that exited non-zero (a failure, or a crash: TSan's own reports do
# not count, exitcode=0) or never printed its summary fails the run.
report() {
  grep -E "^\[ +(OK|PASSED|FAILED) " "$1" | tail -8 || true
  if grep -q "^\[  FAILED  \]" "$1"; then
    grep -E ": Failure$" -A6 "$1" | grep -v "^ *#" | head -60 || true
    status=1
  fi
  if [ "$2" -ne 0 ] || ! grep -q "^\[  PASSED  \]\|^\[  FAILED  \]" "$1"; then
    echo "exited $2 without finishing its tests (a crash?); the end of its log:"
    tail -30 "$1"
    status=1
  fi
}
for t in membership_test grpc_transport_test directory_service_test storage_service_test client_test \
         gateway_protocol_test grpc_access_test reminder_remote_test silo_host_test \
         security_test connection_rotation_test silo_authorization_test cancellation_remote_test streaming_test; do
  echo "== $t"
  rc=0
  TSAN_OPTIONS="$options exitcode=0" "$build/tests/$t" > "$logs/$t.log" 2>&1 || rc=$?
  report "$logs/$t.log" "$rc"
done
# A dev cluster of TSan-built silos under the routing tests: the silos'
# own reports are kept (GRANARY_CHILD_STDERR_DIR) and filtered the same way
# (exitcode=0: the tests check the silos' exit codes, which gRPC's reports
# would otherwise turn into 66).
mkdir -p "$logs/silos"
for t in cluster_routing_test cluster_failure_test; do
  echo "== $t"
  rc=0
  TSAN_OPTIONS="$options exitcode=0" \
      GRANARY_CHILD_STDERR_DIR="$logs/silos" GRANARY_CLUSTER_TEST_SCALE=0.05 \
      "$build/tests/$t" \
      --gtest_filter='*OneActivation*:*Graceful*:*Killed*:*Reminders*:*OneReply*:*Partition*' > "$logs/$t.log" 2>&1 || rc=$?
  report "$logs/$t.log" "$rc"
done
/usr/bin/python3 scripts/tsan_grpc_filter.py "$PWD" "$logs"/*.log "$logs"/silos/*.log || status=1
rm -rf "$logs"
exit $status
