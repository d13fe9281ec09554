#!/usr/bin/env bash
# proto_check_test: `granary proto check` as a user runs it, against a
# directory and against a git revision of a scratch repository: exit 0 and
# "checked: compatible" for a compatible change, exit 1 naming a breaking
# one, exit 2 for each kind of bad usage or input.
#
#   proto_check_test.sh GRANARY_BINARY TESTDATA_DIR
# (TESTDATA_DIR: proto/codegen/testdata/check, a baseline and copies of it
# with one change each.)
set -euo pipefail
granary=${1:?usage: proto_check_test.sh GRANARY_BINARY TESTDATA_DIR}
data=${2:?usage: proto_check_test.sh GRANARY_BINARY TESTDATA_DIR}
granary=$(realpath "$granary")
data=$(realpath "$data")
[[ -x $granary && -f $data/baseline.proto ]] || {
  echo "proto_check_test: no $granary or no $data/baseline.proto" >&2
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# expect CODE WANTED_OUTPUT -- COMMAND...: runs COMMAND in $work, checks its
# exit status and that its output (stdout and stderr) holds WANTED_OUTPUT.
expect() {
  local code=$1 want=$2
  shift 3
  local out got=0
  out=$(cd "$work" && "$@" 2>&1) || got=$?
  if [[ $got -ne $code || $out != *"$want"* ]]; then
    echo "FAIL: $* exited $got (want $code) with output:" >&2
    echo "$out" >&2
    echo "(want: '$want')" >&2
    failures=$((failures + 1))
  fi
}

# old/shop/cart.proto: the previous release; new/shop/cart.proto: this one.
mkdir -p "$work/old/shop" "$work/new/shop"
cp "$data/baseline.proto" "$work/old/shop/cart.proto"
use() { cp "$data/$1" "$work/new/shop/cart.proto"; }

# Against a directory.
use ok_compatible.proto
expect 0 "1 grain interface checked: compatible" -- \
  "$granary" proto check --against=old -I new new/shop/cart.proto
# The CLI's flags may come before the command (they are not proto check's).
expect 0 "checked: compatible" -- \
  "$granary" --timeout=5s proto check --against=old -I new new/shop/cart.proto
use ok_added_method_bumped.proto
expect 0 "checked: compatible" -- \
  "$granary" proto check --against old --proto_path=new new/shop/cart.proto
use changed_field_type.proto
expect 1 "new/shop/cart.proto: check.v1.CartGrain.Add: message check.v1.Item field 2 (quantity): type changed from int64 to string" -- \
  "$granary" proto check --against=old -I new new/shop/cart.proto
use added_method.proto
expect 1 "method Clear is new: bump the version of check.v1.CartGrain to 3" -- \
  "$granary" proto check --against=old -Inew new/shop/cart.proto
use removed_method.proto
expect 1 "1 problem against the previous release in old" -- \
  "$granary" proto check --against=old -I new new/shop/cart.proto
# A file the previous release lacks is new.
mkdir -p "$work/new/shop/extra"
cp "$data/baseline.proto" "$work/new/shop/extra/fresh.proto"
sed -i 's/^package check.v1;/package check.v2;/' "$work/new/shop/extra/fresh.proto"
expect 0 "(1 file new since the previous release)" -- \
  "$granary" proto check --against=old -I new new/shop/extra/fresh.proto
expect 0 "note: no file is in the previous release" -- \
  "$granary" proto check --against=old -I new new/shop/extra/fresh.proto

# Bad usage and bad input: exit 2, saying what is wrong.
use ok_compatible.proto
expect 2 "proto needs a command: check" -- "$granary" proto
expect 2 "unknown proto command 'verify'" -- "$granary" proto verify
expect 2 "proto check needs .proto files" -- \
  "$granary" proto check --against=old -I new
expect 2 "proto check needs --against=DIR|REVISION" -- \
  "$granary" proto check -I new new/shop/cart.proto
expect 2 "proto check has no option --gateway" -- \
  "$granary" proto check --gateway=127.0.0.1:1 --against=old new/shop/cart.proto
expect 2 "-I needs a value" -- \
  "$granary" proto check --against=old new/shop/cart.proto -I
expect 2 "--against is empty" -- \
  "$granary" proto check --against= -I new new/shop/cart.proto
expect 2 "new/shop/nothing.proto: no such file" -- \
  "$granary" proto check --against=old -I new new/shop/nothing.proto
expect 2 "-I gone: no such directory" -- \
  "$granary" proto check --against=old -I gone new/shop/cart.proto
expect 2 "is in no -I directory" -- \
  "$granary" proto check --against=old -I old new/shop/cart.proto
printf 'syntax = "proto3";\nmessage {\n' > "$work/new/shop/broken.proto"
expect 2 "new/shop/broken.proto does not parse:" -- \
  "$granary" proto check --against=old -I new new/shop/broken.proto
cp "$work/new/shop/broken.proto" "$work/old/shop/cart.proto"
expect 2 "the previous release of new/shop/cart.proto (in old) does not parse" -- \
  "$granary" proto check --against=old -I new new/shop/cart.proto
cp "$data/baseline.proto" "$work/old/shop/cart.proto"
expect 2 "'v9' is neither a directory nor a git revision" -- \
  "$granary" proto check --against=v9 -I new new/shop/cart.proto
expect 0 "granary proto check --against=DIR|REVISION" -- \
  "$granary" proto check --help

# Against a git revision: a repository whose v1 is the baseline, checked
# from its top and from a subdirectory; the previous release's imports are
# read at the revision too (common.proto changes after v1).
repo=$work/repo
mkdir -p "$repo/proto/shop"
git -C "$repo" init -q
cp "$data/baseline.proto" "$repo/proto/shop/cart.proto"
cat > "$repo/proto/shop/common.proto" <<'EOF'
syntax = "proto3";
package common;
message Money { int64 cents = 1; }
EOF
cat > "$repo/proto/shop/pay.proto" <<'EOF'
syntax = "proto3";
package pay;
import "granary/options.proto";
import "shop/common.proto";
service Till {
  option (granary.grain) = {};
  rpc Pay(common.Money) returns (common.Money);
}
EOF
git -C "$repo" add -A
git -C "$repo" -c user.name=test -c user.email=test@localhost commit -qm v1
git -C "$repo" tag v1
cp "$data/changed_read_only.proto" "$repo/proto/shop/cart.proto"
expect 1 "proto/shop/cart.proto: check.v1.CartGrain.Get: read_only changed from true to false" -- \
  bash -c 'cd repo && "$0" proto check --against=v1 -I proto proto/shop/cart.proto' "$granary"
expect 1 "shop/cart.proto: check.v1.CartGrain.Get: read_only changed" -- \
  bash -c 'cd repo/proto && "$0" proto check --against=v1 shop/cart.proto' "$granary"
cp "$data/ok_renamed_field.proto" "$repo/proto/shop/cart.proto"
expect 0 "1 grain interface checked: compatible" -- \
  bash -c 'cd repo && "$0" proto check --against=v1 -I proto proto/shop/cart.proto' "$granary"
sed -i 's/int64 cents = 1;/string cents = 1;/' "$repo/proto/shop/common.proto"
expect 1 "pay.Till.Pay: message common.Money field 1 (cents): type changed from int64 to string" -- \
  bash -c 'cd repo && "$0" proto check --against=v1 -I proto proto/shop/pay.proto' "$granary"
expect 2 "'v2' is neither a directory nor a git revision of the repository here" -- \
  bash -c 'cd repo && "$0" proto check --against=v2 -I proto proto/shop/cart.proto' "$granary"
expect 2 "is neither a directory nor a git revision" -- \
  bash -c 'cd old && "$0" proto check --against=HEAD -I ../new ../new/shop/cart.proto' "$granary"

if [[ $failures -ne 0 ]]; then
  echo "proto_check_test: $failures failures" >&2
  exit 1
fi
echo "proto_check_test: granary proto check passes compatible changes, names breaking ones, refuses bad usage"
