#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (ASan + UBSan) in build-fuzz/
# and runs each for SECONDS (default 60), seeded with the fixtures, the
# bad-input corpus, schema lines and the regressions. Exits non-zero when a
# target finds a crash; the reproducer's path is printed.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
missing=()
for p in clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
scripts/deps.sh build
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTL_FUZZ=ON \
  -DMEMTL_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)"
corpus=build-fuzz/corpus
rm -rf "$corpus"
mkdir -p "$corpus/reader" "$corpus/schema" "$corpus/pipeline" build-fuzz/crashes
for f in fixtures/*.trace.jsonl.gz fixtures/bad/*.trace*; do cp "$f" "$corpus/reader/"; done
for f in fixtures/dataflow_*.trace.jsonl.gz; do gzip -dc "$f" >"$corpus/reader/$(basename "$f" .gz)"; done
cp tests/fuzz/seeds/schema/* "$corpus/schema/"
cp tests/fuzz/seeds/pipeline/* fixtures/bad/*.trace "$corpus/pipeline/"
status=0
passed=0
failed=0
for t in reader schema pipeline; do
  cp tests/fuzz/regressions/* "$corpus/$t/" 2>/dev/null || true
  log=build-fuzz/fuzz_$t.log
  set +e
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
    build-fuzz/tests/fuzz/fuzz_$t "$corpus/$t" -dict=tests/fuzz/dict.txt -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/$t- >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -m1 "stat::number_of_executed_units" "$log" | awk '{print $2}')
  cov=$(grep -E "^#[0-9]+" "$log" | tail -1 | grep -o "cov: [0-9]*" || true)
  ft=$(grep -E "^#[0-9]+" "$log" | tail -1 | grep -o "ft: [0-9]*" || true)
  echo "fuzz_$t: ${seconds}s, ${execs:-?} executions, $cov, $ft, exit $rc"
  if [ "$rc" -ne 0 ]; then
    status=1
    failed=$((failed + 1))
    grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -5
  else
    passed=$((passed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
exit $status
