#!/usr/bin/env bash
# Builds the Debian packages from a build tree and checks them (granary-dev
# at the end):
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

# The SDK (cmake/sdk.cmake): granary-dev of the same version, its files
# only under its own directories, the ones a user's build reads present,
# and Depends on the runtime package and the -dev packages it builds with.
dev="$work/out/granary-dev_${version}_amd64.deb"
[ -f "$dev" ] || fail "no $(basename "$dev") (got: $(ls "$work/out"))"
dpkg-deb --contents "$dev" | awk '$1 !~ /^d/ {print $NF}' | sed 's|^\.||' |
  sort >"$work/dev-have"
stray=$(grep -vE '^/usr/(include/granary/|lib/granary/libgranary_[a-z0-9_]+\.a$|lib/cmake/granary/|share/granary/proto/granary/|bin/protoc-gen-granary$)' \
  "$work/dev-have" || true)
[ -z "$stray" ] || fail "granary-dev holds files outside the SDK's directories: $stray"
for f in /usr/include/granary/silo/silo_host.h /usr/include/granary/silo/grain_library.h \
  /usr/include/granary/client/client.h /usr/include/granary/testing/in_process_cluster.h \
  /usr/include/granary/granary/options.pb.h /usr/lib/granary/libgranary_silo.a \
  /usr/lib/granary/libgranary_client.a /usr/lib/granary/libgranary_testing.a \
  /usr/lib/cmake/granary/granaryConfig.cmake /usr/lib/cmake/granary/granaryConfigVersion.cmake \
  /usr/lib/cmake/granary/granary_grain_library.cmake /usr/bin/protoc-gen-granary \
  /usr/share/granary/proto/granary/options.proto /usr/share/granary/proto/granary/v1/gateway.proto; do
  grep -qx "$f" "$work/dev-have" || fail "granary-dev lacks $f"
done
# Internals no public header includes stay out.
for f in /usr/include/granary/storage/rocksdb_storage.h /usr/include/granary/silo/grain_library_loader.h; do
  if grep -qx "$f" "$work/dev-have"; then fail "granary-dev holds the internal $f"; fi
done
dev_depends=$(dpkg-deb -f "$dev" Depends)
for d in "granary (= $version)" libgrpc++-dev libprotobuf-dev protobuf-compiler-grpc libabsl-dev \
  librocksdb-dev libpq-dev libcivetweb-dev libssl-dev; do
  case "$dev_depends" in *"$d"*) ;; *) fail "granary-dev's Depends lacks $d: $dev_depends" ;; esac
done
echo "package_test: $(basename "$dev") ok ($(wc -l <"$work/dev-have") files)"
