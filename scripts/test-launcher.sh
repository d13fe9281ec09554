#!/usr/bin/env bash
# Runs one CTest test (every add_test goes through it; cmake/granary.cmake):
#
#   test-launcher.sh COMMAND [ARGS...]
#
# - The test gets a temporary directory of its own, as TMPDIR and
#   TEST_TMPDIR (so std::filesystem::temp_directory_path, mktemp, Python's
#   tempfile and ::testing::TempDir all land in it). It is removed when the
#   test ends, however it ends: a run leaves nothing behind in /tmp.
# - The test runs in a process group of its own. When it ends (or CTest
#   stops it at its timeout), whatever it started and left running dies
#   with it: its process group, and any process whose command line names
#   the test's directory (a PostgreSQL server started in a session of its
#   own with a data directory in there).
# - A GoogleTest binary whose every test was skipped (GTEST_SKIP) exits 77,
#   which CTest reports as skipped (SKIP_RETURN_CODE 77), not passed. A
#   binary that skipped some of its tests says how many on its last line.
#   A script reports its own skip by exiting 77.
set -u

if [ $# -eq 0 ]; then
  echo "test-launcher: usage: test-launcher.sh COMMAND [ARGS...]" >&2
  exit 2
fi

base=${TMPDIR:-/tmp}
dir=$(mktemp -d "$base/granary-test.XXXXXX") || exit 1
# Tests start PostgreSQL as the postgres user, in directories under here.
chmod 1777 "$dir"
report="$dir/.gtest-report.json"

child=""
reap() {
  if [ -n "$child" ]; then
    kill -TERM -- "-$child" 2>/dev/null
    # A moment for graceful exits, then no more.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 -- "-$child" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$child" 2>/dev/null
  fi
  pkill -KILL -f -- "$dir/" 2>/dev/null
  # A process killed a moment ago may still hold files open.
  for _ in 1 2 3 4 5; do
    rm -rf -- "$dir" 2>/dev/null && break
    sleep 0.2
  done
}
on_signal() {
  reap
  exit 143
}
trap on_signal TERM INT HUP

# setsid: a new session and process group, led by the test.
TMPDIR="$dir" TEST_TMPDIR="$dir" GTEST_OUTPUT="json:$report" \
  setsid "$@" &
child=$!
wait "$child"
rc=$?

if [ "$rc" -eq 0 ] && [ -s "$report" ]; then
  # "result": "COMPLETED" for a test that ran, "SKIPPED" for one that
  # skipped itself.
  ran=$(grep -c '"result": "COMPLETED"' "$report")
  skipped=$(grep -c '"result": "SKIPPED"' "$report")
  if [ "$skipped" -gt 0 ] && [ "$ran" -eq 0 ]; then
    echo "test-launcher: every test was skipped ($skipped)"
    rc=77
  elif [ "$skipped" -gt 0 ]; then
    echo "test-launcher: $ran tests ran, $skipped skipped"
  fi
fi
reap
exit "$rc"
