#!/usr/bin/env bash
# The benchmark. For each size (events) it generates an input from a recorded
# real step (tests/bench/gen_trace.py; cached in build/bench/ and remade when
# the generator or the source is newer), then measures in the same run
# `gzip -dc` of the file and `memtl export` to .json, .raw.json.gz and .html:
# wall seconds, ratio to gzip -dc, peak RSS (GNU time %M), bytes/event and
# events/s, plus the per-stage breakdown of the .json export when memtl has
# --timings. Best of 3 runs at <= 200000 events, 1 run above (RUNS=N forces
# N); the commands of one repetition run back to back, so gzip and memtl see
# the same machine state. Markdown on stdout (for docs/performance.md),
# progress on stderr. A failing command is reported and its cells read FAIL.
#
#   tests/bench/run_bench.sh [SIZES...]          default: 100000 1000000
#   tests/bench/run_bench.sh 100000 1000000 10000000
#   SOURCE=build/bench/transformer_adam_3steps.trace.jsonl.gz tests/bench/run_bench.sh 100000
#   MEMTL=path/to/memtl RUNS=5 tests/bench/run_bench.sh 100000
set -uo pipefail
cd "$(dirname "$0")/../.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 1000000)
bin=${MEMTL:-build/cli/memtl}
source_trace=${SOURCE:-fixtures/resnet18_sgd_step.trace.jsonl.gz}
gen=tests/bench/gen_trace.py
py=python3
command -v "$py" >/dev/null || py=/usr/bin/python3
[ -x "$bin" ] || { echo "run_bench: $bin not found; build memtl first (scripts/build.sh)" >&2; exit 2; }
[ -s "$source_trace" ] || { echo "run_bench: source $source_trace not found" >&2; exit 2; }
if [ ! -x /usr/bin/time ]; then
  echo "run_bench: installing GNU time" >&2
  apt-get install -y time >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y time >/dev/null 2>&1; } ||
    { echo "run_bench: /usr/bin/time (Debian package time) is missing" >&2; exit 2; }
fi
mkdir -p build/bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log() { echo "run_bench: $*" >&2; }

src_base=$(basename "$source_trace" .trace.jsonl.gz)
input_for() { # cached input for a size; the default source keeps the short name
  if [ "$source_trace" = fixtures/resnet18_sgd_step.trace.jsonl.gz ]; then
    echo "build/bench/t$1.trace.jsonl.gz"
  else
    echo "build/bench/t$1.$src_base.trace.jsonl.gz"
  fi
}

# run NAME CMD...: one timed run; appends "seconds rss_kib" to $tmp/NAME, or
# "FAIL" when the command fails (its stderr goes to ours)
run() {
  local name=$1
  shift
  local s e rc
  s=$(date +%s%N)
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$@" >/dev/null 2>"$tmp/err"
  rc=$?
  e=$(date +%s%N)
  if [ $rc -ne 0 ]; then
    log "FAILED (status $rc): $*"
    sed 's/^/    /' "$tmp/err" | tail -5 >&2
    echo FAIL >>"$tmp/$name"
    return
  fi
  echo "$(awk -v s="$s" -v e="$e" 'BEGIN{printf "%.3f", (e - s) / 1e9}') $(tail -1 "$tmp/time" | cut -d' ' -f2)" >>"$tmp/$name"
}
# best NAME: "best_seconds max_rss_kib" over the runs, or "FAIL"
best() {
  awk '$1 == "FAIL" {f = 1} $1 != "FAIL" {if (b == "" || $1 < b) b = $1; if ($2 > r) r = $2}
       END {if (f || b == "") print "FAIL"; else print b, r}' "$tmp/$1"
}

# CPU already busy before we start (other jobs distort a 2-core machine)
cpu_busy() { # percent of all cores busy over one second
  local a b
  a=($(head -1 /proc/stat))
  sleep 1
  b=($(head -1 /proc/stat))
  awk -v u=$((b[1] + b[2] + b[3] + b[6] + b[7] - a[1] - a[2] - a[3] - a[6] - a[7])) \
    -v i=$((b[4] + b[5] - a[4] - a[5])) 'BEGIN{printf "%.0f", (u + i) ? 100 * u / (u + i) : 0}'
}
busy=$(cpu_busy)
[ "$busy" -gt 10 ] && log "warning: the machine was ${busy}% busy before the benchmark; timings will be distorted"

# measure a copy, so that a rebuild during the run cannot mix two binaries
built=$(date -u -r "$bin" '+%Y-%m-%d %H:%M:%S UTC')
shown_bin=$bin
cp "$bin" "$tmp/memtl" && bin="$tmp/memtl"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
git diff --quiet HEAD -- 2>/dev/null || commit="$commit+dirty"
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -sr), $(gzip --version | head -1); CPU ${busy}% busy just before the run."
echo "memtl: \`$shown_bin\` built $built (measured from a copy), tree at $commit. Source: \`$source_trace\`."
echo
if [ -n "${RUNS:-}" ]; then runs_text="best of $RUNS runs at every size"; else runs_text="best of 3 runs at <= 200000 events, else 1"; fi
echo "Commands (F = input, $runs_text; wall time from \`date +%s%N\` around \`/usr/bin/time -f '%e %M'\`, which gives the peak RSS):"
echo
echo '```'
echo "$py $gen --source $source_trace --events N --out F"
echo "gzip -dc F > /dev/null"
echo "$shown_bin export F -o OUT.json"
echo "$shown_bin export F -o OUT.raw.json.gz"
echo "$shown_bin export F -o OUT.html"
echo '```'
echo
echo "| events | gz MiB | raw MiB | gzip -dc s | .json s | x gzip | RSS MiB | B/event | Mevents/s | .raw.json.gz s | x gzip | RSS MiB | B/event | Mevents/s | .html s | x gzip | RSS MiB | B/event | Mevents/s | max RSS / raw size |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"

declare -A json_s json_rss identity_line
for n in "${sizes[@]}"; do
  f=$(input_for "$n")
  if [ ! -s "$f" ] || [ "$gen" -nt "$f" ] || [ "$source_trace" -nt "$f" ]; then
    log "generating $f"
    "$py" "$gen" --source "$source_trace" --events "$n" --out "$f" >&2 || { log "generation failed"; exit 2; }
  fi
  runs=${RUNS:-1}
  [ -z "${RUNS:-}" ] && [ "$n" -le 200000 ] && runs=3
  raw_bytes=$(gzip -dc "$f" | wc -c)
  rm -f "$tmp"/{gz,json,raw,html}
  for r in $(seq "$runs"); do
    log "$n events: run $r/$runs"
    run gz sh -c "gzip -dc '$f' > /dev/null"
    run json "$bin" export "$f" -o "$tmp/o.json"
    run raw "$bin" export "$f" -o "$tmp/o.raw.json.gz"
    run html "$bin" export "$f" -o "$tmp/o.html"
  done
  read -r g _ < <(best gz)
  row=$(awk -v n="$n" -v gz="$(stat -c %s "$f")" -v raw="$raw_bytes" 'BEGIN{printf "| %d | %.1f | %.1f |", n, gz/1048576, raw/1048576}')
  row="$row $g |"
  maxrss=0
  for k in json raw html; do
    read -r s rss < <(best $k)
    if [ "$s" = FAIL ] || [ "$g" = FAIL ]; then
      row="$row FAIL | | | | |"
      continue
    fi
    [ "$rss" -gt "$maxrss" ] && maxrss=$rss
    [ $k = json ] && json_s[$n]=$s && json_rss[$n]=$rss
    row="$row $(awk -v n="$n" -v s="$s" -v g="$g" -v rss="$rss" 'BEGIN{
      printf "%.2f | %.2f | %.0f | %.0f | %.2f |", s, s/g, rss/1024, rss*1024/n, n/s/1e6}')"
  done
  row="$row $(awk -v m="$maxrss" -v raw="$raw_bytes" 'BEGIN{if (m > 0) printf "%.3f |", m*1024/raw; else printf " |"}')"
  echo "$row"
  # the outputs of the timed runs against a single-threaded run (--threads 1)
  log "$n events: single-threaded run for the byte-identity check"
  same=""
  for k in json raw.json.gz html; do
    if "$bin" export "$f" -o "$tmp/s.$k" --threads 1 >/dev/null 2>&1 && cmp -s "$tmp/o.$k" "$tmp/s.$k"; then
      same="$same .$k=identical"
    else
      same="$same .$k=DIFFERENT"
    fi
    rm -f "$tmp/s.$k"
  done
  identity_line[$n]="$same"
done
echo
echo "Outputs of the timed runs against \`memtl export F -o OUT --threads 1\` (\`cmp\`):"
echo
for n in "${sizes[@]}"; do echo "- $n events:${identity_line[$n]:- not checked}"; done

# growth between consecutive sizes (.json export)
if [ ${#sizes[@]} -gt 1 ]; then
  echo
  echo "| .json export growth | events | time | peak RSS |"
  echo "|---|---:|---:|---:|"
  prev=""
  for n in "${sizes[@]}"; do
    if [ -n "$prev" ] && [ -n "${json_s[$n]:-}" ] && [ -n "${json_s[$prev]:-}" ]; then
      awk -v a="$prev" -v b="$n" -v ta="${json_s[$prev]}" -v tb="${json_s[$n]}" -v ra="${json_rss[$prev]}" -v rb="${json_rss[$n]}" \
        'BEGIN{printf "| %d -> %d | x%.1f | x%.2f | x%.2f |\n", a, b, b/a, tb/ta, rb/ra}'
    fi
    prev=$n
  done
fi

# per-stage breakdown, when this memtl has --timings
probe=$(input_for "${sizes[0]}")
if "$bin" export "$probe" -o "$tmp/o.json" --timings >/dev/null 2>"$tmp/err" && grep -q '^memtl: timing:' "$tmp/err"; then
  for n in "${sizes[@]}"; do
    log "$n events: --timings run"
    "$bin" export "$(input_for "$n")" -o "$tmp/o.json" --timings 2>"$tmp/t$n" >/dev/null ||
      { log "--timings run failed for $n"; : >"$tmp/t$n"; }
  done
  echo
  echo "Stages of \`memtl export F -o OUT.json --timings\` (one extra run per size; seconds, peak RSS MiB so far, page faults in the stage, i.e. first touches of memory, each mapping 4 KiB, and the MiB still resident when the stage ended):"
  echo
  header="| stage |"
  sep="|---|"
  for n in "${sizes[@]}"; do header="$header $n s | RSS MiB | faults | kept MiB |"; sep="$sep---:|---:|---:|---:|"; done
  echo "$header"
  echo "$sep"
  # lines: "memtl: timing: PHASE SECONDS [s] [peak RSS MIB MiB] [page faults N]
  # [resident after MIB MiB]" (PHASE may have spaces)
  for n in "${sizes[@]}"; do
    awk '/^memtl: timing:/ {
      name = ""; sec = ""; rss = ""; fresh = ""; kept = ""
      for (i = 3; i <= NF; i++) {
        if (sec == "" && $i ~ /^[0-9.]+s?$/) { sec = $i; sub(/s$/, "", sec) }
        else if (sec == "") name = name (name == "" ? "" : " ") $i
        else if ($i == "RSS" && i < NF) rss = $(i + 1)
        else if ($i == "faults" && i < NF) fresh = $(i + 1)
        else if ($i == "after" && i < NF) kept = $(i + 1)
      }
      if (sec != "") printf "%s\t%s\t%s\t%s\t%s\n", name, sec, rss, fresh, kept
    }' "$tmp/t$n" >"$tmp/p$n"
  done
  cut -f1 "$tmp/p${sizes[0]}" | while IFS= read -r stage; do
    line="| $stage |"
    for n in "${sizes[@]}"; do
      v=$(awk -F'\t' -v s="$stage" '$1 == s {print $2 " | " $3 " | " $4 " | " $5; found=1} END {if (!found) print " |  |  | "}' "$tmp/p$n")
      line="$line $v |"
    done
    echo "$line"
  done
else
  echo
  echo "(no per-stage breakdown: \`memtl export --timings\` failed or printed no \`memtl: timing:\` lines: $(head -1 "$tmp/err"))"
fi
