#!/usr/bin/env bash
# CI guard against speed regressions: on a ~100k-event input generated from a
# committed fixture, the best of 3 `memtl export -o out.json` must take at
# most THRESHOLD (default 3) times the best of 3 `gzip -dc` of the same file,
# measured in the same run. Prints the ratio either way.
#   tests/bench/check_ratio.sh MEMTL_BINARY [THRESHOLD]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$1"
threshold="${2:-3}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$root/tests/bench/gen_trace.py" --events 100000 --out "$tmp/t.trace.jsonl.gz" >/dev/null
best() {
  local b=""
  for _ in 1 2 3; do
    local s e
    s=$(date +%s.%N)
    "$@" >/dev/null
    e=$(date +%s.%N)
    local d
    d=$(awk "BEGIN{print $e - $s}")
    if [ -z "$b" ] || awk "BEGIN{exit !($d < $b)}"; then b=$d; fi
  done
  echo "$b"
}
g=$(best sh -c "gzip -dc '$tmp/t.trace.jsonl.gz' > /dev/null")
m=$(best "$bin" export "$tmp/t.trace.jsonl.gz" -o "$tmp/out.json")
ratio=$(awk "BEGIN{printf \"%.2f\", $m / $g}")
echo "memtl export ${m}s, gzip -dc ${g}s: ratio $ratio (threshold $threshold)"
if awk "BEGIN{exit !($ratio > $threshold)}"; then
  echo "speed regression: memtl export takes more than ${threshold}x gzip -dc" >&2
  exit 1
fi
