#!/usr/bin/env bash
# The Node.js example (examples/node/client.js) against a real silo: a copy of
# examples/node gets its locked packages (npm ci), then calls
# granary.examples.Counter (Add, Get) and watches granary.examples.Chat,
# receiving a post, on a plaintext granary-silo --examples; a call with no
# grain key fails with INVALID_ARGUMENT. Then again over mutual TLS with a
# bearer token (certificates of scripts/dev-certs.sh), and without the token
# (UNAUTHENTICATED).
#
#   node_client_test.sh SILO_BINARY SOURCE_DIR
#
# Exits 77 (skipped) when node or npm is not installed. A failing npm ci (the
# npm registry out of reach, say) is a failure; packages already in npm's
# cache are taken from there (--prefer-offline).
set -uo pipefail
silo_bin=${1:?usage: node_client_test.sh SILO_BINARY SOURCE_DIR}
source=${2:?usage: node_client_test.sh SILO_BINARY SOURCE_DIR}

for tool in node npm; do
  if ! command -v "$tool" > /dev/null 2>&1; then
    echo "node_client_test: skipped: $tool is not on PATH" \
      "(Debian: apt-get install nodejs npm)"
    exit 77
  fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/node-client-test.XXXXXX") || exit 1
silo_pid=""
stop_silo() {
  [ -n "$silo_pid" ] || return 0
  kill -TERM "$silo_pid" 2> /dev/null
  wait "$silo_pid"
  local code=$?
  silo_pid=""
  return $code
}
cleanup() {
  stop_silo
  rm -rf -- "$tmp"
}
trap cleanup EXIT

passed=0
failed=0
check() { # check CONDITION_STATUS WHAT
  if [ "$1" -eq 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: $2" >&2
  fi
}
show() { # show FILE...: a failed step's output
  local f
  for f in "$@"; do
    echo "--- $(basename "$f")" >&2
    cat "$f" >&2
  done
}

# The example as a user gets it: its files without any node_modules.
app="$tmp/node"
mkdir "$app"
for f in "$source"/examples/node/*; do
  [ "$(basename "$f")" = node_modules ] || cp -R "$f" "$app/"
done
echo "node $(node --version), npm $(npm --version): npm ci"
if ! (cd "$app" && npm ci --no-audit --no-fund --prefer-offline) \
  > "$tmp/npm.out" 2>&1; then
  show "$tmp/npm.out"
  echo "node_client_test: npm ci failed in a copy of examples/node; is the" \
    "npm registry ($(npm config get registry 2> /dev/null)) reachable?" >&2
  exit 1
fi

# start_silo NAME [FLAGS...]: granary-silo --examples on free ports; sets
# silo_pid and gateway (from its READY line).
start_silo() {
  local name=$1
  shift
  "$silo_bin" --examples --gateway=127.0.0.1:0 --silo=127.0.0.1:0 \
    --http=127.0.0.1:0 --data_dir="$tmp/$name-data" --log_level=warning "$@" \
    > "$tmp/$name.out" 2> "$tmp/$name.err" &
  silo_pid=$!
  local i
  for ((i = 0; i < 600; i++)); do
    if grep -q '^READY ' "$tmp/$name.out"; then
      gateway=$(sed -n 's/^READY .*gateway=\([^ ]*\).*/\1/p' "$tmp/$name.out")
      return 0
    fi
    if ! kill -0 "$silo_pid" 2> /dev/null; then
      break
    fi
    sleep 0.05
  done
  show "$tmp/$name.out" "$tmp/$name.err"
  echo "node_client_test: granary-silo ($name) printed no READY line" >&2
  exit 1
}

# client NAME [FLAGS...]: runs client.js; its output in $tmp/NAME.out, .err
# and its exit code in $rc.
client() {
  local name=$1
  shift
  timeout 60 node "$app/client.js" --proto_root="$source" \
    --gateway="$gateway" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
  rc=$?
}

# expect NAME PATTERN: a line of NAME's output matches the extended regex.
expect() {
  grep -Eq -- "$2" "$tmp/$1.out"
  local found=$?
  [ $found -eq 0 ] || show "$tmp/$1.out" "$tmp/$1.err"
  check $found "$1: no line matching /$2/"
}
expect_ok() { # expect_ok NAME: exited 0
  local ok=0
  [ "$rc" -eq 0 ] || { ok=1; show "$tmp/$1.out" "$tmp/$1.err"; }
  check $ok "$1: exit code $rc"
}
expect_failure() { # expect_failure NAME CODE_NAME: exited 1 with that status
  local ok=1
  [ "$rc" -eq 1 ] && grep -q "failed: $2 (code [0-9]*)" "$tmp/$1.err" && ok=0
  [ $ok -eq 0 ] || show "$tmp/$1.out" "$tmp/$1.err"
  check $ok "$1: exit code $rc, wanted 1 and $2"
}

start_silo plain
client first --key=node-alice --add=5 --room=node-room --text=first
expect_ok first
expect first '^Counter/node-alice Add\(5\) -> 5$'
expect first '^Counter/node-alice Get\(\) -> 5$'
expect first '^Chat/node-room Watch received seq=[0-9]+ node: first #[0-9]+$'
expect first '^Chat/node-room Watch ended \(CANCELLED\)$'
# The same grain and room: the sum goes on, and the watch sees the new post.
client second --key=node-alice --add=2 --room=node-room --text=second
expect_ok second
expect second '^Counter/node-alice Add\(2\) -> 7$'
expect second '^Counter/node-alice Get\(\) -> 7$'
expect second '^Chat/node-room Watch received seq=[0-9]+ node: second #[0-9]+$'
client nokey --key= --add=1
expect_failure nokey INVALID_ARGUMENT
stop_silo
check $? "granary-silo (plain) exit code after SIGTERM"

# Mutual TLS and a bearer token.
certs="$tmp/certs"
if ! bash "$source/scripts/dev-certs.sh" "$certs" > "$tmp/certs.out" 2>&1; then
  show "$tmp/certs.out"
  echo "node_client_test: scripts/dev-certs.sh failed" >&2
  exit 1
fi
start_silo tls --tls_cert="$certs/gateway.pem" --tls_key="$certs/gateway.key" \
  --tls_client_ca="$certs/ca.pem" --auth_tokens="$certs/tokens"
tls=(--tls_ca="$certs/ca.pem" --tls_cert="$certs/client.pem"
  --tls_key="$certs/client.key")
client tls "${tls[@]}" --token_file="$certs/token" --key=node-bob --add=3 \
  --room=node-tls --text=secure
expect_ok tls
expect tls '^Counter/node-bob Add\(3\) -> 3$'
expect tls '^Counter/node-bob Get\(\) -> 3$'
expect tls '^Chat/node-tls Watch received seq=[0-9]+ node: secure #[0-9]+$'
client notoken "${tls[@]}" --key=node-bob --add=1
expect_failure notoken UNAUTHENTICATED
stop_silo
check $? "granary-silo (tls) exit code after SIGTERM"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
