#!/usr/bin/env bash
# End-to-end checks of the memtl command: exit statuses and one-line errors.
set -u
root="$1"
bin="${MEMTL:?set MEMTL to the memtl binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
check() {  # check NAME EXPECTED_STATUS EXPECTED_STDERR_SUBSTRING -- CMD...
  local name="$1" want="$2" msg="$3"
  shift 4
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -eq "$want" ] && grep -qF -- "$msg" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -le 1 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $name: status $got (want $want); stderr: $(cat "$tmp/err")"
  fi
}
check missing-file 2 "$tmp/nope.trace: cannot open" -- "$bin" graph "$tmp/nope.trace"
printf 'not json\n' >"$tmp/bad.trace"
check not-json 2 "$tmp/bad.trace: line 1: not valid JSON" -- "$bin" graph "$tmp/bad.trace"
: >"$tmp/empty.trace"
check empty 2 "empty file" -- "$bin" graph "$tmp/empty.trace"
printf '{"format":"memtl-trace","version":99}\n' >"$tmp/future.trace"
check future-version 2 "newer than this memtl reads" -- "$bin" graph "$tmp/future.trace"
head -c 300 "$root/fixtures/dataflow_simple.trace.jsonl.gz" >"$tmp/cut.gz"
check truncated-gzip 2 "truncated gzip stream" -- "$bin" graph "$tmp/cut.gz"
check unknown-command 2 "unknown command" -- "$bin" frobnicate
check no-args 2 "" -- "$bin"
check graph-ok 0 "" -- "$bin" graph "$root/fixtures/dataflow_simple.trace.jsonl.gz"
if [ ! -s "$tmp/out" ]; then fail=$((fail + 1)); echo "FAIL graph-ok: empty output"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
