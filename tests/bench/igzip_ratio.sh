#!/usr/bin/env bash
# Issue 19's speed targets, measured in one run: on gzip trace F,
# `memtl export F -o x.json` against ISA-L's `igzip -dc F` (the fastest
# streaming inflater Debian packages), RUNS alternating pairs, with the
# median ratio; events per second end to end; peak RSS above what
# `memtl --help` holds, per event; and the read stage on the same trace
# decompressed (plain JSON Lines), in GB/s of input.
#   tests/bench/igzip_ratio.sh F [RUNS]     (MEMTL=build/cli/memtl by default)
# Needs igzip (Debian isal) and GNU time. Prints one Markdown table row.
set -euo pipefail
f="$1"
runs="${2:-5}"
memtl="${MEMTL:-build/cli/memtl}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
events=$(zcat "$f" | grep -c '"k":"\(op\|alloc\|py\|other\)"' || true)
ratios=() ; mt=() ; it=()
for _ in $(seq "$runs"); do
  a=$(now); igzip -dc "$f" >/dev/null; b=$(now)
  "$memtl" export "$f" -o "$tmp/x.json" -q; c=$(now)
  it+=("$(echo "$b - $a" | bc -l)"); mt+=("$(echo "$c - $b" | bc -l)")
  ratios+=("$(echo "($c - $b) / ($b - $a)" | bc -l)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
ratio=$(median "${ratios[@]}"); tm=$(median "${mt[@]}"); ti=$(median "${it[@]}")
rss=$( { /usr/bin/time -f %M "$memtl" export "$f" -o "$tmp/x.json" -q; } 2>&1 | tail -1)
base=$( { /usr/bin/time -f %M "$memtl" --help >/dev/null; } 2>&1 | tail -1)
igzip -dc "$f" >"$tmp/plain.jsonl"
plain_bytes=$(stat -c %s "$tmp/plain.jsonl")
reads=()
for _ in $(seq "$runs"); do
  reads+=("$("$memtl" export "$tmp/plain.jsonl" -o "$tmp/y.json" -q --timings 2>&1 | awk '$3 == "read" {print $4}')")
done
tr=$(median "${reads[@]}")
cmp -s "$tmp/x.json" "$tmp/y.json" || { echo "igzip_ratio: gzip and plain exports differ" >&2; exit 1; }
printf '| %s | %d | %.3f s | %.3f s | %.2fx | %.2f M/s | %.1f | %.2f GB/s |\n' \
  "$(basename "$f")" "$events" "$ti" "$tm" "$ratio" "$(echo "$events / $tm / 1000000" | bc -l)" \
  "$(echo "($rss - $base) * 1024 / $events" | bc -l)" "$(echo "$plain_bytes / $tr / 1000000000" | bc -l)"
