#!/usr/bin/env bash
# Builds the libFuzzer targets (CMake preset `fuzz`: clang, ASan+UBSan,
# build-fuzz/) and runs each for FUZZ_SECONDS on a copy of its seed corpus
# (fuzz/corpus/<target>/). Fails when any target finds a crash, a leak, a
# timeout or runs out of memory; prints one line per target.
#
#   bash scripts/fuzz.sh                   # every target, 60 s each
#   FUZZ_SECONDS=10 bash scripts/fuzz.sh   # a smoke run
#   FUZZ_TARGETS="directory membership" bash scripts/fuzz.sh
#   FUZZ_SECONDS=0 bash scripts/fuzz.sh    # only replay the seeds (regressions)
#
# What a target finds is kept in build-fuzz/fuzz-artifacts/<target>/
# (crash-*, leak-*, timeout-*, oom-*) with its log; fuzz/README.md says how
# to reproduce one and keep it as a regression seed. Without clang++ the
# script says so and exits 0.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD="$ROOT/build-fuzz"
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
if ! [[ "$FUZZ_SECONDS" =~ ^[0-9]+$ ]]; then
  echo "fuzz: FUZZ_SECONDS must be a number of seconds, not '$FUZZ_SECONDS'" >&2
  exit 2
fi
ALL_TARGETS="gateway_batch grpc_bridge membership directory storage_record"
ALL_TARGETS+=" cli_json admin_http"
FUZZ_TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}

if ! command -v clang++ > /dev/null 2>&1; then
  echo "clang not found: fuzzing skipped"
  exit 0
fi

for t in $FUZZ_TARGETS; do
  case " $ALL_TARGETS " in
    *" $t "*) ;;
    *) echo "fuzz: unknown target '$t' (targets: $ALL_TARGETS)" >&2; exit 2 ;;
  esac
done

# The code generator runs during the build, instrumented like everything
# else; its one-shot allocations are no leak worth failing the build on.
export ASAN_OPTIONS=detect_leaks=0
cmake --preset fuzz > /dev/null
targets=()
for t in $FUZZ_TARGETS; do targets+=("${t}_fuzzer"); done
nice cmake --build "$BUILD" --target "${targets[@]}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
summary=()
for t in $FUZZ_TARGETS; do
  artifacts="$BUILD/fuzz-artifacts/$t"
  rm -rf "$artifacts"
  mkdir -p "$artifacts" "$work/$t/corpus"
  cp -R "$ROOT/fuzz/corpus/$t/." "$work/$t/corpus/"
  log="$artifacts/fuzz.log"
  status=0
  # Run from the temporary directory: nothing is written elsewhere but the
  # artifacts and the log.
  if [ "$FUZZ_SECONDS" -gt 0 ]; then
    length=(-max_total_time="$FUZZ_SECONDS")
  else
    length=(-runs=0)
  fi
  (cd "$work/$t" && "$BUILD/fuzz/${t}_fuzzer" "${length[@]}" \
      -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" corpus > "$log" 2>&1) || status=$?
  found=$(find "$artifacts" -maxdepth 1 -type f \
              \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
                 -o -name 'oom-*' -o -name 'slow-unit-*' \) | sort | head -1)
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  runs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<< "$done_line")
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<< "$done_line")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<< "$done_line")
  corp=$(sed -nE 's/.* corp: ([0-9]+).*/\1/p' <<< "$done_line")
  execs=$(sed -nE 's/.* exec\/s: ([0-9]+).*/\1/p' <<< "$done_line")
  if [ "$status" -ne 0 ] || [ -n "$found" ] || [ -z "$done_line" ]; then
    failed+=("$t")
    what=${found:+$(basename "$found")}
    line="$t: FAILED (exit $status${what:+, $what}); see $log"
  else
    line="$t: ok  runs=$runs exec/s=$execs cov=$cov ft=$ft corpus=$corp"
    if [ "$FUZZ_SECONDS" -gt 0 ]; then
      line+=" (${FUZZ_SECONDS}s)"
    else
      line+=" (seeds only)"
    fi
  fi
  summary+=("$line")
  echo "$line"
done

echo
echo "fuzz summary:"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
