#!/usr/bin/env bash
# The training runs of the profile-guided build (scripts/build.sh): BIN
# exports every fixture, and a 10^5-event trace generated from the resnet18
# step (tests/bench/gen_trace.py, when a python3 is at hand), to each
# format. The profile is what memtl does on real traces, big and small;
# error paths are left out (they are optimized as without a profile).
#   scripts/pgo_train.sh BIN
set -euo pipefail
bin=$(realpath "$1")
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
inputs=(fixtures/*.trace.jsonl.gz)
py=$(command -v python3 || echo /usr/bin/python3)
if "$py" tests/bench/gen_trace.py --source fixtures/resnet18_sgd_step.trace.jsonl.gz \
     --events 100000 --out "$tmp/t100000.trace.jsonl.gz" >/dev/null 2>&1; then
  inputs+=("$tmp/t100000.trace.jsonl.gz")
else
  echo "pgo_train: no python3 to generate the 10^5-event trace; training on the fixtures only" >&2
fi
for f in "${inputs[@]}"; do
  for fmt in json raw.json.gz html; do
    # A fixture that memtl refuses (none today) still trains its path.
    "$bin" export "$f" -o "$tmp/out.$fmt" >/dev/null 2>&1 || true
  done
done
