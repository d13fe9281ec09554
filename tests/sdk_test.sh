#!/usr/bin/env bash
# sdk_test: Granary as a user gets it. Installs the two packages' contents
# (CPack components runtime and dev, as `make package` packs them) into a
# temporary root, builds examples/standalone there against them alone, and
#   - runs its unit test (granary::testing);
#   - starts its own silo and greets through it with its own client;
#   - starts the packaged granary-silo with --grain_library=libgreeter.so
#     and calls the grain with its client and with the packaged CLI;
#   - checks that no compile or link step named the source or build tree.
# Where the test may make a mount namespace (root), the source and build
# trees are hidden under empty directories while the example builds.
# Usage: sdk_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "sdk_test: $*" >&2; exit 1; }

root="$work/root"
for component in runtime dev; do
  DESTDIR="$root" cmake --install "$build" --prefix /usr --component "$component" \
    --strip >"$work/install-$component.log" 2>&1 ||
    { cat "$work/install-$component.log" >&2; fail "installing $component failed"; }
done
[ -x "$root/usr/bin/granary-silo" ] || fail "no granary-silo installed"
[ -f "$root/usr/lib/cmake/granary/granaryConfig.cmake" ] || fail "no CMake package"

# The example, copied out of the tree: only its own files.
cp -r "$src/examples/standalone" "$work/example"
example="$work/example"
configure_and_build() {
  cmake -S "$example" -B "$example/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON &&
    cmake --build "$example/build" -j 2
}
export -f configure_and_build
export example root
hidden=no
if unshare --mount true 2>/dev/null; then
  # A private mount namespace: the trees are empty directories in it.
  unshare --mount bash -c '
    mount -t tmpfs none "$2" && mount -t tmpfs none "$1" &&
    [ -z "$(ls -A "$1")" ] && configure_and_build' _ "$src" "$build" \
    >"$work/build.log" 2>&1 || { tail -50 "$work/build.log" >&2; fail "the example does not build"; }
  hidden=yes
else
  configure_and_build >"$work/build.log" 2>&1 ||
    { tail -50 "$work/build.log" >&2; fail "the example does not build"; }
fi
if grep -Fq -e "$src" -e "$build" "$example/build/compile_commands.json" \
     "$example/build/build.ninja"; then
  fail "the example's build names the source or build tree"
fi
echo "sdk_test: examples/standalone built against the installed packages" \
  "(source tree hidden: $hidden)"

"$example/build/greeter_test" >"$work/unit.log" 2>&1 ||
  { cat "$work/unit.log" >&2; fail "greeter_test failed"; }
echo "sdk_test: greeter_test passed"

# Starts "$@" in the background; sets $gateway from its READY line.
start_silo() {
  local out="$work/silo-$#-$RANDOM.out"
  "$@" >"$out" 2>"$out.err" &
  pids+=($!)
  local pid=$!
  for _ in $(seq 1 300); do
    if grep -q '^READY ' "$out"; then
      gateway=$(sed -n 's/^READY .*gateway=\([^ ]*\).*/\1/p' "$out")
      silo_pid=$pid
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$out.err" >&2; fail "$1 exited"; }
    sleep 0.1
  done
  cat "$out.err" >&2
  fail "$1 never became ready"
}
stop_silo() {
  kill -TERM "$silo_pid"
  wait "$silo_pid" || fail "the silo did not stop cleanly"
}
ports=(--gateway=127.0.0.1:0 --silo=127.0.0.1:0 --http=127.0.0.1:0)

# Its own silo, its own client.
start_silo "$example/build/greeter-silo" "${ports[@]}" --data_dir="$work/own"
got=$("$example/build/greeter-client" "$gateway" alice Ada 2>/dev/null)
[ "$got" = "Hello, Ada, from alice! (greeting 1)" ] || fail "own silo answered: $got"
got=$("$example/build/greeter-client" "$gateway" alice Ada 2>/dev/null)
[ "$got" = "Hello, Ada, from alice! (greeting 2)" ] || fail "own silo answered: $got"
if "$example/build/greeter-client" "$gateway" alice "" 2>"$work/empty.err"; then
  fail "an empty name was greeted"
fi
grep -q "INVALID_ARGUMENT: a greeting needs a name" "$work/empty.err" ||
  fail "an empty name: $(cat "$work/empty.err")"
stop_silo
echo "sdk_test: greeter-silo and greeter-client work"

# The packaged silo with the library.
lib="$example/build/libgreeter.so"
[ -f "$lib" ] || fail "no libgreeter.so"
start_silo "$root/usr/bin/granary-silo" "${ports[@]}" --data_dir="$work/packaged" \
  --grain_library="$lib"
got=$("$example/build/greeter-client" "$gateway" bob Linus 2>/dev/null)
[ "$got" = "Hello, Linus, from bob! (greeting 1)" ] || fail "packaged silo answered: $got"
got=$("$root/usr/bin/granary" --gateway="$gateway" call Greeter/bob Greet '{"name":"cli"}')
case "$got" in
  *'"text":"Hello, cli, from bob!"'*'"greetings":"2"'*) ;;
  *) fail "the CLI got: $got" ;;
esac
stop_silo
echo "sdk_test: the packaged granary-silo hosts libgreeter.so"
