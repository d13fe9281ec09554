#!/usr/bin/env bash
# Builds the Debian package from a build tree and checks it:
#   - it is granary_<version>_amd64.deb, with the version silos report;
#   - `dpkg-deb --contents` lists exactly the files the
#     "package-contents" block of docs/deployment.md names;
#   - /etc/granary/silo.conf is a conffile, the maintainer scripts parse,
#     and the units are the ones systemd_units_test verifies;
#   - it depends on Debian's runtime library packages (no -dev package);
#   - its granary-silo runs: --check_config passes on the packaged
#     silo.conf, and a bad flag in it exits 2.
# Usage: package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "package_test: $*" >&2; exit 1; }

version=$(sed -n 's/.*define GRANARY_VERSION_STRING "\([0-9.]*\)".*/\1/p' "$src/core/version.h")
[ -n "$version" ] || fail "no version in core/version.h"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb="$work/out/granary_${version}_amd64.deb"
[ -f "$deb" ] || fail "no $(basename "$deb") (got: $(ls "$work/out"))"

# Files (not directories) in the package, as absolute paths.
dpkg-deb --contents "$deb" | awk '$1 !~ /^d/ {print $NF}' | sed 's|^\.||' |
  sort >"$work/have"
# The documented list: the lines of the code block after the marker.
doc=docs/deployment.md
awk '/<!-- package-contents -->/ {on=1; next}
     on && /^```/ {if (started) exit; started=1; next}
     on && started && NF {print $1}' "$src/$doc" | sort >"$work/want"
[ -s "$work/want" ] || fail "$doc has no package-contents block"
if ! diff -u "$work/want" "$work/have" >"$work/diff"; then
  cat "$work/diff" >&2
  fail "the package's files differ from the list in $doc (- $doc, + package)"
fi

dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/granary/silo.conf "$work/control/conffiles" ||
  fail "/etc/granary/silo.conf is not a conffile"
for script in postinst prerm postrm; do
  [ -x "$work/control/$script" ] || fail "no executable $script"
  sh -n "$work/control/$script" || fail "$script does not parse"
done
grep -q "adduser --system" "$work/control/postinst" ||
  fail "postinst creates no system user"

depends=$(dpkg-deb -f "$deb" Depends)
for lib in libgrpc++ librocksdb libprotobuf libabsl libpq5 libcivetweb adduser; do
  case "$depends" in *"$lib"*) ;; *) fail "Depends lacks $lib: $depends" ;; esac
done
case "$depends" in *-dev*) fail "Depends names a -dev package: $depends" ;; esac
[ "$(dpkg-deb -f "$deb" Architecture)" = amd64 ] || fail "not amd64"

dpkg-deb -x "$deb" "$work/root"
for unit in granary-silo.service granary-silo@.service; do
  cmp -s "$work/root/usr/lib/systemd/system/$unit" "$src/deploy/systemd/$unit" ||
    fail "the packaged $unit is not deploy/systemd/$unit"
done
silo="$work/root/usr/bin/granary-silo"
# The packaged configuration, as the unit reads it (EnvironmentFile=), with
# the state directory the unit would give it.
env_of() { grep -E '^GRANARY_[A-Z0-9_]+=' "$work/root/etc/granary/silo.conf"; }
mkdir -p "$work/state"
(cd "$work/state" && env $(env_of) GRANARY_DATA_DIR="$work/state/data" \
  "$silo" --check_config >"$work/check.out" 2>"$work/check.err") ||
  { cat "$work/check.err" >&2; fail "--check_config fails on the packaged silo.conf"; }
grep -q -- "--gateway=127.0.0.1:30000" "$work/check.out" ||
  fail "--check_config printed no effective --gateway"
# The example grains are demonstrations anyone may call: the packaged
# configuration leaves them out.
if env_of | grep -q '^GRANARY_EXAMPLES='; then
  fail "the packaged silo.conf hosts the example grains (GRANARY_EXAMPLES)"
fi
set +e
(cd "$work/state" && env $(env_of) GRANARY_MAX_MAILBOX=lots "$silo" --check_config \
  >/dev/null 2>"$work/bad.err")
code=$?
set -e
[ "$code" = 2 ] || fail "a bad GRANARY_MAX_MAILBOX exits $code, not 2"
grep -q GRANARY_MAX_MAILBOX "$work/bad.err" || fail "the error does not name the variable"
echo "package_test: $(basename "$deb") ok ($(wc -l <"$work/have") files)"
