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
  local msg_ok=1
  if [ -n "$msg" ]; then
    grep -qF -- "$msg" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -le 1 ] || msg_ok=0
  else
    [ ! -s "$tmp/err" ] || msg_ok=0
  fi
  if [ "$got" -eq "$want" ] && [ "$msg_ok" -eq 1 ]; then
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
"$bin" >/dev/null 2>"$tmp/err"
if [ $? -eq 2 ] && grep -qi "usage: memtl" "$tmp/err"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL no-args"; fi
for h in --help -h; do
  check "help$h" 0 "" -- "$bin" "$h"
  grep -qi "usage: memtl" "$tmp/out" || { fail=$((fail + 1)); echo "FAIL help$h: no usage on stdout"; }
  check "help-after-command$h" 0 "" -- "$bin" export "$h"
done
# Each command's help lists its own options only.
check help-export 0 "" -- "$bin" export --help
grep -q -- "--device" "$tmp/out" && grep -qi "usage: memtl export" "$tmp/out" && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL help-export: no export usage or --device"; }
check help-graph 0 "" -- "$bin" graph --help
grep -q -- "--device" "$tmp/out" && { fail=$((fail + 1)); echo "FAIL help-graph lists --device"; } || pass=$((pass + 1))
for v in --version -V; do
  check "version$v" 0 "" -- "$bin" "$v"
  grep -qE "^memtl [0-9]+\.[0-9]+" "$tmp/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL version$v"; }
done
# An option that does not apply to a command is an error, not ignored.
check graph-with-output 2 "not expected" -- "$bin" graph "$root/fixtures/dataflow_simple.trace.jsonl.gz" -o "$tmp/g.json"
check export-no-output 2 "--output is required (see memtl export --help)" -- \
  "$bin" export "$root/fixtures/dataflow_simple.trace.jsonl.gz"
check unknown-option 2 "(see memtl export --help)" -- \
  "$bin" export "$root/fixtures/dataflow_simple.trace.jsonl.gz" -o "$tmp/u.json" --bogus
# --opt=value; a value that starts with a dash is given that way.
check device-named-h 2 'device "-h" is not in the trace' -- \
  "$bin" export "$root/fixtures/dataflow_simple.trace.jsonl.gz" --output="$tmp/h.json" --device=-h
check graph-ok 0 "" -- "$bin" graph "$root/fixtures/dataflow_simple.trace.jsonl.gz"
if [ ! -s "$tmp/out" ]; then fail=$((fail + 1)); echo "FAIL graph-ok: empty output"; fi
# export: formats by suffix, bad device, bad suffix, no partial output.
fx="$root/fixtures/e2e_fwd_bwd_sgd.trace.jsonl.gz"
check export-json 0 "memtl: wrote $tmp/t.json (cpu peak " -- "$bin" export "$fx" -o "$tmp/t.json"
check export-raw 0 "memtl: wrote $tmp/t.raw.json.gz (cpu peak " -- "$bin" export "$fx" -o "$tmp/t.raw.json.gz"
check export-gz 0 "memtl: wrote" -- "$bin" export "$fx" -o "$tmp/t.json.gz"
check export-html 0 "" -- "$bin" export "$fx" -o "$tmp/t.html" --quiet
# Several outputs from one analysis: the same bytes as one at a time.
check export-several 0 "memtl: wrote $tmp/s.json, $tmp/s.html" -- "$bin" export "$fx" -o "$tmp/s.json" -o "$tmp/s.html"
if cmp -s "$tmp/s.json" "$tmp/t.json" && cmp -s "$tmp/s.html" "$tmp/t.html"; then pass=$((pass + 1)); else
  fail=$((fail + 1)); echo "FAIL export-several: outputs differ from single exports"; fi
# Standard input and output: "-" as the trace, "-o -" with --format.
gzip -dc "$fx" | "$bin" export - -o - --format json >"$tmp/stdout.json" 2>"$tmp/err"
cmp -s "$tmp/stdout.json" "$tmp/t.json" && grep -q "wrote standard output" "$tmp/err" && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL stdin/stdout: $(cat "$tmp/err")"; }
check stdout-needs-format 2 "-o - writes standard output: give its --format" -- "$bin" export "$fx" -o -
check stdout-bad-format 2 "--format" -- "$bin" export "$fx" -o - --format png
check export-several-bad-suffix 2 "unknown output format" -- "$bin" export "$fx" -o "$tmp/b.json" -o "$tmp/b.txt"
[ ! -e "$tmp/b.json" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: wrote b.json before refusing b.txt"; }
if head -c 1 "$tmp/t.json" | grep -q '\[' && gzip -t "$tmp/t.raw.json.gz" && gzip -t "$tmp/t.json.gz" &&
  grep -q "data:image/png;base64," "$tmp/t.html" && grep -q "Who holds the memory at the peak" "$tmp/t.html" &&
  [ "$(grep -c '<tr><td class="n">' "$tmp/t.html")" -ge 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL export contents"; fi
# The HTML export loads nothing at run time (the plot is drawn by memtl):
# a missing trace is the first and only error, and nothing is written.
check export-html-missing-trace 2 "$tmp/nope.trace: cannot open" -- \
  "$bin" export "$tmp/nope.trace" -o "$tmp/nc.html"
[ ! -e "$tmp/nc.html" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL missing trace: wrote $tmp/nc.html"; }
check export-bad-device 2 'device "cuda:3" is not in the trace (devices: cpu)' -- "$bin" export "$fx" -o "$tmp/d.json" --device cuda:3
check export-bad-suffix 2 "unknown output format" -- "$bin" export "$fx" -o "$tmp/d.txt"
check export-unwritable 2 "cannot write" -- "$bin" export "$fx" -o "$tmp/no/such/dir/d.json"
if ls -A "$tmp" | grep -q -E '^(d\.|\.d\.)'; then fail=$((fail + 1)); echo "FAIL partial output left behind"; else pass=$((pass + 1)); fi
check categories 0 "" -- "$bin" categories "$fx"
# peak: the summary, the categories and the largest tensors; JSON for programs.
check peak 0 "" -- "$bin" peak "$fx" --top 3
head -n 1 "$tmp/out" | grep -qE "^peak of cpu: .* at [0-9.]+ ms \([0-9]+ tensors alive" &&
  [ "$(sed -n '/^largest tensors/,$p' "$tmp/out" | wc -l)" -eq 5 ] && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL peak: $(head -n 1 "$tmp/out")"; }
check peak-json 0 "" -- "$bin" peak "$fx" --format=json --top 2
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['any'] and len(d['largest'])==2 and sum(d['by_category'].values())==d['bytes']" "$tmp/out" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL peak-json"; }
check peak-bad-format 2 "--format" -- "$bin" peak "$fx" --format xml
# events: the timeline with context, a row per event, as JSON Lines too.
check events-json 0 "" -- "$bin" events "$fx" --format json
"$bin" categories "$fx" >"$tmp/cats.txt"
python3 -c "import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; n=sum(1 for _ in open(sys.argv[2])); assert len(rows)==n and all('op' in r and 'phase' in r for r in rows)" "$tmp/out" "$tmp/cats.txt" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL events-json"; }
check events-text 0 "" -- "$bin" events "$fx"
# The trace is never an output, whatever the path names it by.
cp "$fx" "$tmp/in.trace.json"
ln -s in.trace.json "$tmp/link.json"
check output-is-trace 2 "is the trace being read" -- "$bin" export "$tmp/in.trace.json" -o "$tmp/in.trace.json"
check output-links-to-trace 2 "is the trace being read" -- "$bin" export "$tmp/in.trace.json" -o "$tmp/link.json"
cmp -s "$fx" "$tmp/in.trace.json" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL the trace was changed"; }
rm "$tmp/in.trace.json" "$tmp/link.json"
# A symbolic link's target is replaced; a named pipe is written as a stream.
echo old >"$tmp/real.json"
ln -s real.json "$tmp/lnk.json"
check export-through-link 0 "" -- "$bin" export "$fx" -o "$tmp/lnk.json" -q
[ -L "$tmp/lnk.json" ] && cmp -s "$tmp/real.json" "$tmp/t.json" && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL export-through-link"; }
rm "$tmp/lnk.json" "$tmp/real.json"
mkfifo "$tmp/pipe.json"
cat "$tmp/pipe.json" >"$tmp/from_pipe.json" &
check export-to-fifo 0 "" -- "$bin" export "$fx" -o "$tmp/pipe.json" -q
wait
cmp -s "$tmp/from_pipe.json" "$tmp/t.json" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL export-to-fifo"; }
rm "$tmp/pipe.json" "$tmp/from_pipe.json"
# The same bytes whatever the thread count (reading and writing on one thread).
big="$root/fixtures/resnet18_sgd_step.trace.jsonl.gz"
for suffix in json raw.json.gz json.gz html; do
  check "threads-2-$suffix" 0 "" -- "$bin" export "$big" -o "$tmp/m2.$suffix" -q
  check "threads-1-$suffix" 0 "" -- "$bin" export "$big" -o "$tmp/m1.$suffix" --threads 1 -q
  if cmp -s "$tmp/m1.$suffix" "$tmp/m2.$suffix"; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL threads: .$suffix differs between --threads 1 and 2"
  fi
done
check threads-bad 2 "--threads: Value 3 not in range 1 to 2" -- "$bin" export "$big" -o "$tmp/m3.json" --threads 3
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
