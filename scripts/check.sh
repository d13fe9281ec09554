#!/usr/bin/env bash
# make check: what the machine enforces of the conventions, before any test.
#   - every C++ file is clang-format clean (.clang-format; `clang-format -i
#     FILE` fixes one), golden generator output under testdata/ excepted;
#   - no C++ or Python file is longer than 600 lines;
#   - each component includes only what it may depend on
#     (tests/layering_test.sh).
# Prints every offence, then exits 1 if there was one.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format > /dev/null 2>&1; then
  echo "check: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
status=0
# The project's files: git's list, or (a tree without .git) every file
# outside the build directories.
files() {
  if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard "$@"
  else
    local args=() p
    for p in "$@"; do args+=(-o -name "$p"); done
    find . \( -path './build*' -o -path './.git' \) -prune -o -type f \( "${args[@]:1}" \) -print |
      sed 's|^\./||'
  fi
}
# (testdata/ holds generator output compared byte for byte: not ours to
# format.)
mapfile -t cpp < <(files '*.cc' '*.h' | grep -v '/testdata/')
mapfile -t py < <(files '*.py')
unformatted=()
for f in "${cpp[@]}"; do
  [ -f "$f" ] || continue
  clang-format --dry-run --Werror "$f" > /dev/null 2>&1 || unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "check: not clang-format clean (clang-format -i FILE):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  status=1
fi
long=0
for f in "${cpp[@]}" "${py[@]}"; do
  [ -f "$f" ] || continue
  n=$(wc -l < "$f")
  if [ "$n" -gt 600 ]; then
    [ $long -eq 0 ] && echo "check: longer than 600 lines:" >&2
    echo "  $f: $n" >&2
    long=1
    status=1
  fi
done
bash tests/layering_test.sh "$PWD" || status=1
if [ $status -eq 0 ]; then
  echo "check: ${#cpp[@]} C++ files formatted, every file within 600 lines, layering kept"
fi
exit $status
