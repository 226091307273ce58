#!/usr/bin/env bash
# libmemtl_cupti.so where CUPTI cannot record (no GPU or no CUDA driver):
# one line on stderr, said once for a program and the processes it starts,
# the program's own exit status, and no trace written. On a machine where
# CUPTI can record, a program that uses no GPU gets no line and no trace.
# Usage: check_no_gpu.sh LIBMEMTL_CUPTI
set -euo pipefail
lib=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
set +e
env -u MEMTL_CUPTI_SAID LD_PRELOAD="$lib" sh -c 'true; true; exit 7' 2>err
rc=$?
set -e
[ "$rc" = 7 ] || { echo "the program's exit status was $rc, not 7"; exit 1; }
lines=$(wc -l <err)
if [ "$lines" = 0 ] && command -v nvidia-smi >/dev/null && nvidia-smi >/dev/null 2>&1; then
  echo "CUPTI records here (a GPU): no line, as expected"
elif [ "$lines" != 1 ] || ! grep -q '^memtl_cupti: CUPTI cannot record here (.*); the program runs on without it$' err; then
  echo "expected one line on stderr, got $lines:"; cat err; exit 1
fi
if ls memtl_cupti.* >/dev/null 2>&1; then echo "a trace was written:"; ls; exit 1; fi
echo "ok: $(cat err)"
