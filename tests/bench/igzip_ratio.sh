#!/usr/bin/env bash
# Issue 19's speed targets, measured in one run: on gzip trace F,
# `memtl export F -o x.json` against ISA-L's `igzip -dc F` (the fastest
# streaming inflater Debian packages), RUNS alternating rounds, with the
# median ratio; events per second end to end; peak RSS above what
# `memtl --help` holds, per event (median of 3); and the read stage on the
# same trace decompressed (plain JSON Lines), in GB/s of input.
#   tests/bench/igzip_ratio.sh F [RUNS]     (MEMTL=build/cli/memtl by default)
# OLD=path/to/memtl adds a second binary, run in the same rounds (the two
# take turns going first), for a before/after comparison on a busy machine:
# one row each, OLD's first. Each row also gives the median CPU time (user +
# system) of the exports, steadier than wall time when other jobs run.
# Needs igzip (Debian isal), bc and GNU time. Prints Markdown table rows,
# and the load average before and after on stderr.
set -euo pipefail
f="$1"
runs="${2:-5}"
memtl="${MEMTL:-build/cli/memtl}"
bins=("$memtl")
[ -n "${OLD:-}" ] && bins=("$OLD" "$memtl")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "igzip_ratio: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
now() { date +%s.%N; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
events=$(igzip -dc "$f" | grep -c '"k":"\(op\|alloc\|py\|other\)"' || true)
declare -A ratios mt cpu
its=()
for r in $(seq "$runs"); do
  a=$(now); igzip -dc "$f" >/dev/null; b=$(now)
  ti=$(echo "$b - $a" | bc -l); its+=("$ti")
  order=("${bins[@]}")
  [ $((r % 2)) = 0 ] && [ ${#bins[@]} = 2 ] && order=("${bins[1]}" "${bins[0]}")
  for m in "${order[@]}"; do
    c=$(now)
    u=$( { /usr/bin/time -f '%U %S' "$m" export "$f" -o "$tmp/x.json" -q; } 2>&1 | tail -1)
    d=$(now)
    mt[$m]+="$(echo "$d - $c" | bc -l) "
    ratios[$m]+="$(echo "($d - $c) / $ti" | bc -l) "
    cpu[$m]+="$(echo "$u" | awk '{print $1 + $2}') "
  done
done
igzip -dc "$f" >"$tmp/plain.jsonl"
plain_bytes=$(stat -c %s "$tmp/plain.jsonl")
ti=$(median "${its[@]}")
for m in "${bins[@]}"; do
  rss=() ; reads=()
  for _ in 1 2 3; do
    rss+=("$( { /usr/bin/time -f %M "$m" export "$f" -o "$tmp/x.json" -q; } 2>&1 | tail -1)")
  done
  base=$( { /usr/bin/time -f %M "$m" --help >/dev/null; } 2>&1 | tail -1)
  for _ in $(seq "$runs"); do
    reads+=("$("$m" export "$tmp/plain.jsonl" -o "$tmp/y.json" -q --timings 2>&1 | awk '$3 == "read" {print $4}')")
  done
  cmp -s "$tmp/x.json" "$tmp/y.json" || { echo "igzip_ratio: gzip and plain exports differ" >&2; exit 1; }
  # shellcheck disable=SC2086
  tm=$(median ${mt[$m]}); ratio=$(median ${ratios[$m]}); tc=$(median ${cpu[$m]})
  tr=$(median "${reads[@]}")
  printf '| %s | %s | %d | %.3f s | %.3f s (CPU %.2f s) | %.2fx | %.2f M/s | %.1f | %.2f GB/s |\n' \
    "$m" "$(basename "$f")" "$events" "$ti" "$tm" "$tc" "$ratio" "$(echo "$events / $tm / 1000000" | bc -l)" \
    "$(echo "($(median "${rss[@]}") - $base) * 1024 / $events" | bc -l)" "$(echo "$plain_bytes / $tr / 1000000000" | bc -l)"
done
echo "igzip_ratio: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
