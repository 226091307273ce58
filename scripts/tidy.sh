#!/usr/bin/env bash
# clang-tidy (the project's .clang-tidy) over memtl's own sources, two files
# at a time, with the compile commands of build-tidy/ (configured each run);
# exits non-zero on any finding. The format check is scripts/format.sh --check.
#   scripts/tidy.sh [FILE...]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-tidy >/dev/null || { echo "tidy: clang-tidy not found (Debian clang-tidy)" >&2; exit 2; }
# Its own compile commands, without the precompiled header (MEMTL_PCH):
# g++'s .gch is no file clang can read.
cmake -S . -B build-tidy -DMEMTL_PCH=OFF -DMEMTL_BUILD_TESTS=OFF >/dev/null
if [ $# -gt 0 ]; then files=("$@"); else
  mapfile -t files < <(git ls-files 'core/*.cpp' 'passes/*.cpp' 'export/*.cpp' 'cli/*.cpp')
  # The CUPTI collector, where the CUDA toolkit let it be configured.
  if grep -q collect/cupti/ build-tidy/compile_commands.json; then
    mapfile -t -O "${#files[@]}" files < <(git ls-files 'collect/cupti/*.cpp')
  fi
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# g++-only warning options in the compile commands are not clang's.
printf '%s\n' "${files[@]}" |
  xargs -P 2 -n 4 clang-tidy -p build-tidy --quiet --extra-arg=-Wno-unknown-warning-option 2>/dev/null >"$out" || true
if grep -qE "(warning|error):" "$out"; then
  grep -E -A3 "(warning|error):" "$out"
  echo "tidy: $(grep -cE '(warning|error):' "$out") findings in ${#files[@]} files" >&2
  exit 1
fi
echo "tidy: ${#files[@]} files clean"
