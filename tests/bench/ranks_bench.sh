#!/usr/bin/env bash
# memtl ranks on RANKS rank traces of EVENTS events each (issue 31's target:
# wall time at most 1.2x the sum of the single-trace times over the cores),
# in one run: the single-trace time is the median of RUNS analyses of one
# trace alone (`memtl ranks -j 1`), the ranks run analyzes all of them with
# one job per core; the peak RSS of both (GNU time), to show memory bounded
# by the traces analyzed at once, not their number. The rank traces are
# links to one generated trace, named rank0..rankN-1 (memtl takes the rank
# from the file name when the header gives none).
#   tests/bench/ranks_bench.sh [RANKS] [EVENTS] [RUNS]   (default 64 1000000 3; MEMTL=build/cli/memtl)
# Prints one Markdown row; the load average before and after on stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks="${1:-64}"
events="${2:-1000000}"
runs="${3:-3}"
memtl="${MEMTL:-build/cli/memtl}"
src="build/bench/t$events.trace.jsonl.gz"
[ -f "$src" ] || python3 tests/bench/gen_trace.py --events "$events" --out "$src" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/run"
for r in $(seq 0 $((ranks - 1))); do ln -s "$(realpath "$src")" "$tmp/run/run.rank$r.trace.jsonl.gz"; done
cores=$(nproc)
echo "ranks_bench: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
now() { date +%s.%N; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
singles=()
for _ in $(seq "$runs"); do
  a=$(now)
  rss1=$( { /usr/bin/time -f %M "$memtl" ranks -q -j 1 "$tmp/run/run.rank0.trace.jsonl.gz" >/dev/null; } 2>&1 | tail -1)
  b=$(now)
  singles+=("$(echo "$b - $a" | bc -l)")
done
t1=$(median "${singles[@]}")
a=$(now)
rssn=$( { /usr/bin/time -f %M "$memtl" ranks -q --format json "$tmp/run" >"$tmp/out.json"; } 2>&1 | tail -1)
b=$(now)
tn=$(echo "$b - $a" | bc -l)
rows=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["ranks"]))' "$tmp/out.json")
[ "$rows" = "$ranks" ] || { echo "ranks_bench: $rows rows, not $ranks" >&2; exit 1; }
ideal=$(echo "$ranks * $t1 / $cores" | bc -l)
printf '| %d x %d events | %d | %.3f s | %.2f s | %.2f s | %.2fx | %.0f MiB | %.0f MiB |\n' \
  "$ranks" "$events" "$cores" "$t1" "$tn" "$ideal" "$(echo "$tn / $ideal" | bc -l)" \
  "$(echo "$rss1 / 1024" | bc -l)" "$(echo "$rssn / 1024" | bc -l)"
echo "ranks_bench: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
