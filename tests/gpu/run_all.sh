#!/usr/bin/env bash
# The GPU checks in one run (docs/contributing.md, "On a GPU"), for a machine with a
# CUDA GPU and torch: cuda_oracle.py (memtl against PyTorch's own memory
# profiler on every CUDA workload), then, on fresh recordings of the same
# runs as Kineto and execution traces (record_inputs.py), the Kineto path's
# totals (no "Total Allocated" difference may be reported) and the
# execution-trace join (it must succeed; its coverage is printed); CUDA
# memory snapshots of three workloads against the allocator's own peak
# (snapshot_check.py); then the CUPTI collector on a CUDA program that is
# not PyTorch (cupti_check.sh).
#   MEMTL_BIN=build/cli/memtl tests/gpu/run_all.sh OUT_DIR
# Exits non-zero when any check fails; OUT_DIR gets results.json, the
# traces and a log per check.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:?usage: run_all.sh OUT_DIR}"
bin="${MEMTL_BIN:-$root/build/cli/memtl}"
export MEMTL_BIN="$bin" PYTHONPATH="$root/python:$root/tests/python:$root/tests/gpu" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
mkdir -p "$out"
quiet='USDT|CPUAllocator.cpp|UserWarning|_warn_once|execution_trace_observer'
status=0

echo "== cuda_oracle"
"$py" "$root/tests/gpu/cuda_oracle.py" --out "$out/oracle" 2>&1 | grep -Ev "$quiet" || status=1
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== Kineto and execution traces"
"$py" "$root/tests/gpu/record_inputs.py" --out "$out/inputs" 2>&1 | grep -Ev "$quiet" >"$out/record.log"
for k in "$out"/inputs/*.kineto.json.gz; do
  name=$(basename "$k" .kineto.json.gz)
  et="$out/inputs/$name.et.json.gz"
  "$bin" summary "$k" >/dev/null 2>"$out/inputs/$name.kineto.err"
  rc=$?
  differs=$(grep -c "Total Allocated" "$out/inputs/$name.kineto.err")
  "$bin" categories "$k" --et "$et" >/dev/null 2>"$out/inputs/$name.et.err"
  et_rc=$?
  joined=$(grep -o "joined [^;]*;[^)]*)" "$out/inputs/$name.et.err" | head -1)
  verdict=ok
  if [ "$rc" -ne 0 ] || [ "$differs" -ne 0 ] || [ "$et_rc" -ne 0 ]; then
    verdict=FAIL
    status=1
  fi
  printf '%-30s kineto: status %d, totals differ %d; et join: status %d, %s  %s\n' \
    "$name" "$rc" "$differs" "$et_rc" "${joined:-?}" "$verdict"
done

echo "== CUDA memory snapshots"
"$py" "$root/tests/gpu/snapshot_check.py" --out "$out/snapshots" 2>&1 | grep -Ev "$quiet" || status=1
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== CUPTI collector"
bash "$root/tests/gpu/cupti_check.sh" "$(dirname "$(dirname "$bin")")" "$out/cupti" || status=1
exit $status
