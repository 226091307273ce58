#!/usr/bin/env bash
# The CUPTI collector on a GPU (docs/inputs.md): cupti_alloc.cu run under
# libmemtl_cupti.so; memtl's peak of the trace must be the bytes the program
# allocated at its peak, and cudaMemGetInfo's drop at that point at least
# that (the driver rounds allocations up to its pages).
#   MEMTL_BIN=build/cli/memtl tests/gpu/cupti_check.sh BUILD_DIR OUT_DIR
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:?usage: cupti_check.sh BUILD_DIR OUT_DIR}"
out="${2:?usage: cupti_check.sh BUILD_DIR OUT_DIR}"
bin="${MEMTL_BIN:-$build/cli/memtl}"
lib="$build/collect/cupti/libmemtl_cupti.so"
mkdir -p "$out"
[ -f "$lib" ] || { echo "cupti: no $lib (CUPTI not found at configure)"; exit 1; }
nvcc -O2 -o "$out/cupti_alloc" "$root/tests/gpu/cupti_alloc.cu" || exit 1
MEMTL_CUPTI_OUTPUT="$out/cupti_alloc.trace.jsonl.gz" CUDA_INJECTION64_PATH="$lib" \
  "$out/cupti_alloc" >"$out/cupti_alloc.out" 2>"$out/cupti_alloc.err" || { cat "$out/cupti_alloc.err"; exit 1; }
cat "$out/cupti_alloc.err"
"$bin" summary "$out/cupti_alloc.trace.jsonl.gz" --format json >"$out/summary.json" || exit 1
python3 - "$out/cupti_alloc.out" "$out/summary.json" <<'PY'
import json, sys
facts = dict(line.split() for line in open(sys.argv[1]))
summary = json.load(open(sys.argv[2]))
dev = next(d for d in summary["devices"] if d["device"] == "cuda:0")
peak, want = dev["peak_bytes"], int(facts["peak_allocated"])
drop = int(facts["meminfo_delta_at_peak"])
print(f"cupti: memtl peak {peak}, the program's {want}, cudaMemGetInfo drop {drop}")
sys.exit(0 if peak == want and drop >= want else 1)
PY
