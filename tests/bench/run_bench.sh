#!/usr/bin/env bash
# The benchmark: for each size (events), generates an input from a recorded
# real step (tests/bench/gen_trace.py, cached in build/bench/), then measures
# in the same run `gzip -dc` of the file and `memtl export` to .json,
# .raw.json.gz and .html: wall time, peak RSS, ratios, events/s, and the
# per-stage breakdown of the .json export (memtl --timings). Prints Markdown.
#   tests/bench/run_bench.sh [SIZES...]     default: 100000 1000000
#   SOURCE=fixtures/e2e_adam.trace.jsonl.gz tests/bench/run_bench.sh 100000
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 1000000)
bin=build/cli/memtl
[ -x "$bin" ] || { echo "build memtl first (scripts/build.sh)" >&2; exit 2; }
source_trace=${SOURCE:-fixtures/resnet18_sgd_step.trace.jsonl.gz}
mkdir -p build/bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# best wall seconds and max RSS (KiB) of N runs of a command
measure() {
  local n=$1
  shift
  local best="" rss=0
  for _ in $(seq "$n"); do
    /usr/bin/env time -f "%e %M" -o "$tmp/time" "$@" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    read -r s m <"$tmp/time"
    if [ -z "$best" ] || awk "BEGIN{exit !($s < $best)}"; then best=$s; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  echo "$best $rss"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
echo "source: $source_trace; commands: gzip -dc F > /dev/null; $bin export F -o OUT.{json,raw.json.gz,html}"
echo
echo "| events | gz MiB | raw MiB | gzip -dc s | export .json s (x gzip) | .raw.json.gz s (x) | .html s (x) | peak RSS MiB | B/event | RSS / raw size | events/s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for n in "${sizes[@]}"; do
  f=build/bench/t$n.trace.jsonl.gz
  [ -s "$f" ] || python3 tests/bench/gen_trace.py --source "$source_trace" --events "$n" --out "$f" >/dev/null
  runs=1
  [ "$n" -le 200000 ] && runs=3
  gz_mib=$(awk "BEGIN{printf \"%.1f\", $(stat -c %s "$f")/1048576}")
  raw_bytes=$(gzip -dc "$f" | wc -c)
  raw_mib=$(awk "BEGIN{printf \"%.1f\", $raw_bytes/1048576}")
  read -r g _ < <(measure "$runs" sh -c "gzip -dc '$f' > /dev/null")
  read -r j jr < <(measure "$runs" "$bin" export "$f" -o "$tmp/o.json")
  read -r r rr < <(measure "$runs" "$bin" export "$f" -o "$tmp/o.raw.json.gz")
  read -r h hr < <(measure "$runs" "$bin" export "$f" -o "$tmp/o.html")
  rss=$jr
  [ "$rr" -gt "$rss" ] && rss=$rr
  [ "$hr" -gt "$rss" ] && rss=$hr
  awk -v n="$n" -v gz="$gz_mib" -v raw="$raw_mib" -v rawb="$raw_bytes" -v g="$g" -v j="$j" -v r="$r" -v h="$h" -v rss="$rss" 'BEGIN{
    printf "| %d | %s | %s | %.2f | %.2f (%.2fx) | %.2f (%.2fx) | %.2f (%.2fx) | %.0f | %.0f | %.2f | %.2fM |\n",
      n, gz, raw, g, j, j/g, r, r/g, h, h/g, rss/1024, rss*1024/n, rss*1024/rawb, n/j/1e6 }'
done
echo
echo "Stages of the .json export (memtl --timings), largest size:"
echo '```'
"$bin" export "build/bench/t${sizes[-1]}.trace.jsonl.gz" -o "$tmp/o.json" --timings 2>&1 | sed 's/^memtl: timing: //'
echo '```'
