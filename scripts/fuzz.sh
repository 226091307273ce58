#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (ASan + UBSan) in build-fuzz/
# and runs each for SECONDS (default 60), seeded with the fixtures (gzip and
# plain), the bad-input corpus, built-in schema lines, tests/fuzz/seeds/ and
# the regressions; fuzz_structured, whose mutator edits records rather than
# bytes, from every fixture cut into valid traces of at most 8 KiB (its
# -max_len: small traces run several times faster, and the mutator keeps
# to it by dropping subtrees). Prints executions, coverage and
# crashes per target; exits non-zero when a target finds a crash, leak,
# timeout or sanitizer report, printing the reproducer's path. The corpus in
# build-fuzz/corpus/ grows from run to run (delete it for a fresh start).
# fuzz_kineto, fuzz_et and fuzz_raw, whose mutator edits one JSON document
# (tests/fuzz/json_mutator.h), from the Kineto traces, execution traces
# (each with its Kineto trace) and raw timelines of fixtures/ cut into
# documents of at most 8 KiB (tests/fuzz/cut_json_seeds.py; -max_len), and
# their seeds in tests/fuzz/seeds/.
# MEMTL_FUZZ_ASAN=0 builds in build-fuzz-ubsan/ with UBSan alone, several
# times as many executions a second, for the long runs (docs/reliability.md).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#     TARGET: reader schema pipeline structured kineto et raw snapshot
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ "${#targets[@]}" -eq 0 ] && targets=(reader schema pipeline structured kineto et raw snapshot)

missing=()
for p in clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
scripts/deps.sh build

jobs=$(nproc)
[ "$jobs" -gt 2 ] && jobs=2
out=build-fuzz
sanitizers=address,undefined
if [ "${MEMTL_FUZZ_ASAN:-1}" = 0 ]; then
  out=build-fuzz-ubsan
  sanitizers=undefined
fi
CC=clang-14 CXX=clang++-14 cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTL_FUZZ=ON \
  -DMEMTL_FUZZ_SANITIZERS="$sanitizers" -DMEMTL_BUILD_TESTS=OFF >/dev/null
build=()
for t in "${targets[@]}"; do build+=("fuzz_$t"); done
cmake --build "$out" -j"$jobs" --target "${build[@]}"

# Seeds (copied into the corpus; existing corpus files are kept).
corpus=$out/corpus
seeds=$out/seeds
rm -rf "$seeds"
all=(reader schema pipeline structured kineto et raw snapshot)
for t in "${all[@]}"; do mkdir -p "$seeds/$t" "$corpus/$t"; done
mkdir -p "$out/crashes"
for f in fixtures/*.trace.jsonl.gz; do
  b=$(basename "$f" .gz)
  cp "$f" "$seeds/reader/"
  gzip -dc "$f" >"$seeds/reader/$b"
  # fuzz_pipeline ignores inputs over 64 KiB
  [ "$(stat -c %s "$f")" -le 65536 ] && cp "$f" "$seeds/pipeline/"
  [ "$(stat -c %s "$seeds/reader/$b")" -le 65536 ] && cp "$seeds/reader/$b" "$seeds/pipeline/"
done
python3 tests/fuzz/split_seeds.py 8192 "$seeds/structured" fixtures/*.trace.jsonl.gz \
  fixtures/torch2/*.trace.jsonl.gz fixtures/cuda/*.trace.jsonl.gz tests/fuzz/seeds/pipeline/*
cp fixtures/bad/*.trace "$seeds/structured/"
rm -f "$seeds/reader/resnet18_sgd_step.trace.jsonl"  # 1 MB plain: slows every mutation; its gzip stays
cp fixtures/bad/*.trace* "$seeds/reader/"
cp fixtures/bad/*.trace* "$seeds/pipeline/"
cp tests/fuzz/seeds/pipeline/* "$seeds/pipeline/"
cp tests/fuzz/seeds/schema/* "$seeds/schema/"
python3 tests/fuzz/cut_json_seeds.py 8192 "$seeds/kineto" kineto fixtures/kineto/*.kineto.json.gz \
  fixtures/kineto/kineto-h100-bert-small-inference.json.gz fixtures/kineto/mlp_steps.pt.trace.json.gz \
  fixtures/et/*.kineto.json.gz
python3 tests/fuzz/cut_json_seeds.py 8192 "$seeds/raw" raw fixtures/kineto/*.raw.json.gz \
  fixtures/et/*.raw.json.gz
pairs=()
for f in fixtures/et/*.et.json.gz fixtures/kineto/*.et.json.gz; do
  pairs+=("$f" "${f%.et.json.gz}.kineto.json.gz")
done
python3 tests/fuzz/cut_json_seeds.py 8192 "$seeds/et" et "${pairs[@]}"
cp fixtures/bad/kineto_*.json "$seeds/kineto/"
for t in kineto et raw; do cp tests/fuzz/seeds/"$t"/* "$seeds/$t/"; done
# Snapshots as pickles (decoded: the mutations reach the pickle, not gzip),
# and the bad ones.
for f in fixtures/snapshot/*.pickle.gz; do gzip -dc "$f" >"$seeds/snapshot/$(basename "$f" .gz)"; done
cp fixtures/bad/snapshot_*.pickle "$seeds/snapshot/"
# every 15th built-in schema, one per file (the header comment is skipped)
awk 'NR > 1 && NR % 15 == 0 { f = sprintf("%s/builtin%04d", dir, NR); printf "%s", $0 > f; close(f) }' \
  dir="$seeds/schema" core/schema/data/builtin_schemas.txt
for t in "${all[@]}"; do
  cp "$seeds/$t"/* "$corpus/$t/"
  find tests/fuzz/regressions -type f -name "$t-*" -exec cp {} "$corpus/$t/" \;
done

status=0
passed=0
failed=0
for t in "${targets[@]}"; do
  log=$out/fuzz_$t.log
  rm -f "$out"/crashes/"$t"-*
  extra=()
  asan=detect_leaks=1
  # Entropic scheduling spent most of fuzz_structured's time updating the
  # frequencies of its 40,000 features: off, its runs are twice as many.
  # Shorter allocation stacks, a 16 MiB quarantine and smaller redzones
  # make each of its runs 1.6 times faster (a report's allocation stack is
  # shorter; rerun the reproducer for the full one).
  if [ "$t" = structured ]; then
    extra=(-max_len=8192 -entropic=0)
    asan=detect_leaks=1:malloc_context_size=2:quarantine_size_mb=16:max_redzone=64
  fi
  # The documents' mutator keeps to 8 KiB, as the seeds are cut; entropic
  # scheduling off, as for fuzz_structured (its feature frequencies took
  # most of the time).
  case $t in kineto | et | raw) extra=(-max_len=8192 -entropic=0) ;; esac
  set +e
  ASAN_OPTIONS=$asan UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$out"/tests/fuzz/fuzz_$t "$corpus/$t" -dict=tests/fuzz/dict.txt -max_total_time="$seconds" \
    "${extra[@]}" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out"/crashes/"$t"- \
    >"$log" 2>&1
  rc=$?
  set -e
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  rate=$(awk '/stat::average_exec_per_sec/ {print $2}' "$log")
  last=$(grep -E "^#[0-9]+" "$log" | tail -1 || true)
  cov=$(grep -o "cov: [0-9]*" <<<"$last" || true)
  ft=$(grep -o "ft: [0-9]*" <<<"$last" || true)
  corp=$(grep -o "corp: [0-9]*/[0-9]*[a-zA-Z]*" <<<"$last" || true)
  crashes=("$out"/crashes/"$t"-*)
  [ -e "${crashes[0]}" ] || crashes=()
  echo "fuzz_$t: ${seconds}s, ${execs:-?} executions (${rate:-?}/s), ${cov:-cov: ?}, ${ft:-ft: ?}," \
    "${corp:-corp: ?}, ${#crashes[@]} crash(es), exit $rc"
  if [ "$rc" -ne 0 ] || [ "${#crashes[@]}" -gt 0 ]; then
    status=1
    failed=$((failed + 1))
    grep -E "ERROR:|SUMMARY:|runtime error:|Test unit written|^artifact_prefix" "$log" | head -8 | sed 's/^/  /'
    # What a target printed before it trapped (a refusal it treats as a bug).
    grep -B3 -m1 "deadly signal" "$log" | grep -v -E "deadly signal|^#[0-9]" | head -3 | sed 's/^/  before: /' || true
    for c in "${crashes[@]}"; do echo "  reproducer: $c"; done
    echo "  log: $log"
  else
    passed=$((passed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
exit $status
