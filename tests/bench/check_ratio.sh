#!/usr/bin/env bash
# CI guard against speed regressions, as a ratio measured in one run (never an
# absolute time): on a ~100000-event input generated from a committed fixture
# (tests/bench/gen_trace.py; needs no torch), the best of RUNS (default 3)
# `memtl export F -o out.json` must take at most THRESHOLD (default 3) times
# the best of RUNS `gzip -dc F > /dev/null`. The two commands alternate, so
# both see the same machine state. It also guards memory as issue 19 states
# it, at a size where the design shows rather than the binary's own code: on
# a MEM_EVENTS-event input (default 10^6, same source), the peak resident
# memory of `memtl export F -o out.json` above that of `memtl --help` must
# stay at most MAX_BYTES_PER_EVENT per event (default 64; docs/performance.md
# has the measured figures).
# Prints both figures either way; exits 1 when one is over its threshold, 2
# when something could not run.
#
#   tests/bench/check_ratio.sh [MEMTL_BINARY] [THRESHOLD]
#   tests/bench/check_ratio.sh build/cli/memtl 3        (what CTest runs)
#   EVENTS=100000 MEM_EVENTS=1000000 RUNS=3 SOURCE=fixtures/resnet18_sgd_step.trace.jsonl.gz tests/bench/check_ratio.sh
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$root/build/cli/memtl"
if [ $# -gt 0 ] && ! [[ "$1" =~ ^[0-9.]+$ ]]; then
  bin=$1
  shift
fi
threshold=${1:-3}
events=${EVENTS:-100000}
runs=${RUNS:-3}
source_trace=${SOURCE:-$root/fixtures/resnet18_sgd_step.trace.jsonl.gz}
fail() {
  echo "check_ratio: $*" >&2
  exit 2
}
[[ "$threshold" =~ ^[0-9]*\.?[0-9]+$ ]] || fail "threshold must be a number, got '$threshold'"
[ -x "$bin" ] || fail "memtl binary '$bin' not found"
py=python3
command -v "$py" >/dev/null || py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
f="$tmp/t.trace.jsonl.gz"
"$py" "$root/tests/bench/gen_trace.py" --source "$source_trace" --events "$events" --out "$f" >/dev/null ||
  fail "could not generate the input"

# seconds of one run of a command (stdout discarded); fails on a non-zero status
timed() {
  local s e
  s=$(date +%s%N)
  "$@" >/dev/null 2>"$tmp/err" || {
    echo "check_ratio: failed: $*" >&2
    cat "$tmp/err" >&2
    return 1
  }
  e=$(date +%s%N)
  echo $((e - s))
}
best_g="" best_m=""
for _ in $(seq "$runs"); do
  g=$(timed sh -c "gzip -dc '$f' > /dev/null") || exit 2
  m=$(timed "$bin" export "$f" -o "$tmp/out.json") || exit 2
  if [ -z "$best_g" ] || [ "$g" -lt "$best_g" ]; then best_g=$g; fi
  if [ -z "$best_m" ] || [ "$m" -lt "$best_m" ]; then best_m=$m; fi
done
[ -s "$tmp/out.json" ] || fail "memtl export wrote no output"
ratio=$(awk -v m="$best_m" -v g="$best_g" 'BEGIN{printf "%.2f", m / g}')
awk -v m="$best_m" -v g="$best_g" -v r="$ratio" -v t="$threshold" -v n="$events" -v k="$runs" 'BEGIN{
  printf "check_ratio: %d events, best of %d: memtl export -o out.json %.3f s, gzip -dc %.3f s: ratio %s (threshold %s)\n",
    n, k, m / 1e9, g / 1e9, r, t }'
if awk -v r="$ratio" -v t="$threshold" 'BEGIN{exit !(r > t)}'; then
  echo "check_ratio: FAIL: memtl export takes ${ratio}x gzip -dc on the same file, over the ${threshold}x threshold (a speed regression; profile with memtl export --timings)" >&2
  exit 1
fi
max_bpe=${MAX_BYTES_PER_EVENT:-64}
mem_events=${MEM_EVENTS:-1000000}
fm="$tmp/m.trace.jsonl.gz"
"$py" "$root/tests/bench/gen_trace.py" --source "$source_trace" --events "$mem_events" --out "$fm" \
  >/dev/null || fail "could not generate the memory input"
# peak resident KiB of one run of a command (/usr/bin/time: package time)
peak_kib() {
  /usr/bin/time -f %M -o "$tmp/rss" "$@" >/dev/null 2>&1 && cat "$tmp/rss"
}
[ -x /usr/bin/time ] || fail "/usr/bin/time is missing (scripts/deps.sh test installs the package time)"
help_kib=$(peak_kib "$bin" --help)
export_kib=$(peak_kib "$bin" export "$fm" -o "$tmp/mem.json")
[ -n "$help_kib" ] && [ -n "$export_kib" ] || fail "memtl --help or memtl export failed"
bpe=$(awk -v e="$export_kib" -v h="$help_kib" -v n="$mem_events" 'BEGIN{printf "%.1f", (e - h) * 1024 / n}')
echo "check_ratio: ${mem_events} events: peak RSS $((export_kib / 1024)) MiB, $((help_kib / 1024)) MiB for --help: ${bpe} bytes per event above it (threshold ${max_bpe})"
if awk -v b="$bpe" -v t="$max_bpe" 'BEGIN{exit !(b > t)}'; then
  echo "check_ratio: FAIL: memtl export holds ${bpe} bytes per event above memtl --help at its peak, over ${max_bpe} (a memory regression; see memtl export --timings)" >&2
  exit 1
fi
echo "check_ratio: ok"
