#!/usr/bin/env bash
# layering_test: each component includes only what it may depend on
# (docs/architecture.md). Fails naming the file and the include that breaks a
# rule; run from ctest with the source root as $1.
set -euo pipefail
root=$1
failed=0
# The project's folders (includes of libraries are not checked here).
project='core|rpc|directory|storage|silo|client|examples|bench|tests|deploy|testing'
# The stock granary-silo binary hosts the example grains; the `granary`
# tool manages the PostgreSQL schema (`granary db migrate`), so it, not the
# client SDK, may include storage/postgres. The standalone example's unit
# test runs its grain on granary::testing, as a user's test would.
exempt='^silo/main\.cc:|^client/granary_main\.cc:[0-9]+:#include "storage/postgres/|^examples/standalone/[a-z_]+_test\.cc:[0-9]+:#include "testing/'
# folder -> the project folders its files may include (besides its own).
check() {
  local folder=$1 allowed=$2
  local hits
  hits=$(cd "$root" && grep -rnE "^#include \"(${project})/" "$folder" \
           --include='*.h' --include='*.cc' \
         | grep -vE "#include \"(${allowed})/" | grep -vE "${exempt}" || true)
  if [[ -n "$hits" ]]; then
    echo "layering_test: $folder may include only $allowed:" >&2
    echo "$hits" >&2
    failed=1
  fi
}
check core 'core|granary'
check rpc 'core|rpc|granary'
check directory 'core|rpc|directory|granary'
check storage 'core|storage|granary'
check silo 'core|rpc|directory|storage|silo|granary'
# Inside the silo: the runtime is the base; the gateway, the cluster and the
# admin endpoint build on it and not on each other; the silo's root
# (SiloHost) composes them all.
check silo/runtime 'core|rpc|directory|storage|silo/runtime|granary'
check silo/gateway 'core|rpc|directory|storage|silo/runtime|silo/gateway|granary'
check silo/cluster 'core|rpc|directory|storage|silo/runtime|silo/cluster|granary'
check silo/admin 'core|rpc|directory|storage|silo/runtime|silo/admin|granary'
check client 'core|rpc|client|granary'
# granary::testing builds on the silo; production code never includes it
# (the rules above: no folder but tests and bench may).
check testing 'core|rpc|directory|storage|silo|testing|examples|granary'
check examples 'core|rpc|directory|storage|silo|client|examples|granary'
exit $failed
