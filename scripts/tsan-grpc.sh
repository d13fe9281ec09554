#!/usr/bin/env bash
# The gRPC-labelled tests under ThreadSanitizer (`make test-tsan-grpc`).
# Debian's gRPC is not TSan-instrumented, so its internals report races by
# the thousand; scripts/tsan_grpc_filter.py keeps only the races whose two
# accesses are both in Granary's code, and this fails when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-tsan
logs=$(mktemp -d)
status=0
for t in membership_test silo_transport_test directory_service_test storage_service_test client_test \
         gateway_protocol_test grpc_access_test reminder_remote_test; do
  echo "== $t"
  TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0" \
      "$build/tests/$t" > "$logs/$t.log" 2>&1 || true
  grep -E "^\[  (PASSED|FAILED) " "$logs/$t.log" | tail -2 || true
  if grep -q "^\[  FAILED  \]" "$logs/$t.log"; then status=1; fi
done
# A dev cluster of TSan-built silos under the routing tests: the silos'
# own reports are kept (GRANARY_CHILD_STDERR_DIR) and filtered the same way
# (exitcode=0: the tests check the silos' exit codes, which gRPC's reports
# would otherwise turn into 66).
echo "== cluster_routing_test"
mkdir -p "$logs/silos"
TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 exitcode=0" \
    GRANARY_CHILD_STDERR_DIR="$logs/silos" GRANARY_CLUSTER_TEST_SCALE=0.05 \
    "$build/tests/cluster_routing_test" \
    --gtest_filter='*OneActivation*:*Graceful*:*Killed*:*Reminders*:*OneReply*:*Partition*' > "$logs/cluster_routing_test.log" 2>&1 || true
grep -E "^\[ +(OK|PASSED|FAILED) " "$logs/cluster_routing_test.log" | tail -4 || true
/usr/bin/python3 scripts/tsan_grpc_filter.py "$PWD" "$logs"/*.log "$logs"/silos/*.log || status=1
rm -rf "$logs"
exit $status
