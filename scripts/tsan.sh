#!/usr/bin/env bash
# Builds memtl with ThreadSanitizer in build-tsan/ and runs it with two
# threads (the default) on every fixture, to every export format and the
# graph and categories dumps, on the bad-input corpus, and on a generated
# trace large enough for the reader's parse workers. memtl's second thread
# inflates, runs the allocation checks and the op tree's shape beside
# identity, and writes the output; parse workers parse a large trace's
# blocks while the caller appends them; memtl ranks analyzes a trace per
# worker: any data race among them is a report.
# Exits non-zero on the first report (printing it); a bad input failing with
# its one-line error is expected and not a report.
#   scripts/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
# Linked dynamically (MEMTL_STATIC=OFF): the TSan runtime is a shared library.
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTL_BUILD_TESTS=OFF -DMEMTL_STATIC=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
cmake --build build-tsan -j"$(nproc)" --target memtl
bin=build-tsan/cli/memtl
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export TSAN_OPTIONS="halt_on_error=1 exitcode=66"
# Some kernels randomize mmap more than this TSan runtime's memory layout
# allows ("unexpected memory mapping"); without ASLR it runs there too.
run=()
if ! "$bin" --help >/dev/null 2>"$out/probe"; then
  if grep -q "unexpected memory mapping" "$out/probe" && setarch "$(uname -m)" -R "$bin" --help >/dev/null 2>&1; then
    run=(setarch "$(uname -m)" -R)
  else
    echo "tsan: the ThreadSanitizer build does not start:" >&2
    cat "$out/probe" >&2
    exit 1
  fi
fi
runs=0
check() { # ARGS...: run memtl; a ThreadSanitizer report fails the script
  local rc=0
  ${run[@]+"${run[@]}"} "$bin" "$@" >"$out/stdout" 2>"$out/stderr" || rc=$?
  runs=$((runs + 1))
  if [ "$rc" -eq 66 ] || grep -q "ThreadSanitizer" "$out/stderr"; then
    echo "tsan: report from memtl $*" >&2
    cat "$out/stderr" >&2
    exit 1
  fi
}
for f in fixtures/*.trace.jsonl.gz; do
  for ext in json raw.json.gz html; do check export "$f" -o "$out/x.$ext"; done
  check graph "$f"
  check categories "$f"
done
for f in fixtures/bad/*.trace*; do check export "$f" -o "$out/bad.json"; done
# The reader's parse workers start at 64 MiB of decoded trace (the fixtures
# are smaller): a generated trace above that, whole, with an error in a
# later block, and cut off (with and without --partial).
python3 tests/bench/gen_trace.py --events 300000 --out "$out/big.trace.jsonl.gz" >/dev/null
check export "$out/big.trace.jsonl.gz" -o "$out/big.json"
gzip -dc "$out/big.trace.jsonl.gz" >"$out/big.jsonl"
awk 'NR == 200000 { sub(/"i":/, "\"i\":1") } { print }' "$out/big.jsonl" >"$out/bad.jsonl"
check export "$out/bad.jsonl" -o "$out/bad.json"
head -c 70000000 "$out/big.jsonl" >"$out/cut.jsonl"
check export "$out/cut.jsonl" -o "$out/cut.json"
check export "$out/cut.jsonl" --partial -o "$out/cut.json"
# memtl ranks analyzes a trace per worker thread: every torch 2.x fixture
# as a rank of one run (ranks from the file names), four at once.
mkdir -p "$out/ranks"
k=0
for f in fixtures/torch2/*.trace.jsonl.gz; do ln -s "$PWD/$f" "$out/ranks/rank$k.trace.jsonl.gz"; k=$((k + 1)); done
check ranks -j 4 "$out/ranks" -o "$out/ranks.html"
echo "tsan: $runs runs, no report"
