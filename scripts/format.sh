#!/usr/bin/env bash
# Formats the C++ sources with the project's .clang-format; with --check,
# lists files that differ and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cpp' '*.h')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in $files; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then echo "not formatted: $f"; bad=1; fi
  done
  exit $bad
fi
clang-format -i $files
