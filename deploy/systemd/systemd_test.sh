#!/usr/bin/env bash
# The systemd files of deploy/systemd: `systemd-analyze verify` passes on
# both units (with ExecStart pointing at the built granary-silo), and the
# environment file's settings, active and commented-out alike, are ones
# `granary-silo --check_config` takes.
#
#   systemd_test.sh DEPLOY_SYSTEMD_DIR BIN_DIR
set -euo pipefail
src=$1
bin=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "systemd_test: $*" >&2; exit 1; }

command -v systemd-analyze >/dev/null || fail "systemd-analyze is not installed (make deps)"

# 1. The units, with the installed paths mapped into the work folder.
mkdir -p "$work/units"
for unit in granary-silo.service granary-silo@.service; do
  sed -e "s|/usr/bin/granary-silo|$bin/granary-silo|g" \
      -e "s|/etc/granary/|$work/etc/|g" "$src/$unit" > "$work/units/$unit"
done
cp "$work/units/granary-silo@.service" "$work/units/granary-silo@a.service"
sed -i 's|%i|a|g' "$work/units/granary-silo@a.service"
out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no \
        "$work/units/granary-silo.service" "$work/units/granary-silo@a.service" 2>&1) || \
  fail "systemd-analyze verify failed: $out"
# verify exits 0 on warnings (an unknown key, a value it ignores): none is
# acceptable.
[ -z "$out" ] || fail "systemd-analyze verify warned: $out"
for key in Type=notify NoNewPrivileges=yes ProtectSystem=strict StateDirectory=granary \
           RestartPreventExitStatus=3 User=granary "ExecStartPre=/usr/bin/granary-silo --check_config"; do
  grep -qx -- "$key" "$src/granary-silo.service" || fail "granary-silo.service lacks $key"
  grep -qx -- "$key" "$src/granary-silo@.service" || fail "granary-silo@.service lacks $key"
done

# 2. silo.conf: its active lines as the environment, then every
# commented-out setting too, must pass --check_config (certificate and
# secret files aside, which the example only names).
env_of() { grep -E '^[A-Z_]+=' "$1"; }
vars=()
while IFS= read -r line; do vars+=("$line"); done < <(env_of "$src/silo.conf")
[ ${#vars[@]} -gt 0 ] || fail "silo.conf sets nothing"
env -i "${vars[@]}" GRANARY_DATA_DIR="$work/data" "$bin/granary-silo" --check_config \
  > "$work/effective" 2> "$work/err" || fail "silo.conf does not pass --check_config: $(cat "$work/err")"
grep -qx -- "--gateway=127.0.0.1:30000" "$work/effective" || fail "GRANARY_GATEWAY was not read"
grep -qx -- "--log_format=text" "$work/effective" || fail "GRANARY_LOG_FORMAT was not read"
# Every variable named, commented out or not, is a flag of granary-silo.
for name in $(grep -oE '^#?GRANARY_[A-Z_]+' "$src/silo.conf" | tr -d '#' | sort -u); do
  flag=$(echo "${name#GRANARY_}" | tr 'A-Z' 'a-z')
  grep -q -- "^--$flag=" "$work/effective" || fail "silo.conf names $name, which is no flag"
done
# A bad value in the file stops the start with the variable named.
env -i GRANARY_MAX_MAILBOX=lots "$bin/granary-silo" --check_config > /dev/null 2> "$work/err" && \
  fail "a bad GRANARY_MAX_MAILBOX passed --check_config"
grep -q GRANARY_MAX_MAILBOX "$work/err" || fail "the error does not name GRANARY_MAX_MAILBOX: $(cat "$work/err")"
echo "systemd_test: ok"
