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
check graph-with-device 2 "not expected" -- "$bin" graph "$root/fixtures/dataflow_simple.trace.jsonl.gz" --device cpu
# The commands that print take -o as diff and ranks do: the same bytes in a
# file, the format from --format or the suffix; a suffix naming a format
# the command does not write is refused before the analysis, saying what
# writes it (peak -o x.html was "The following arguments were not expected").
pk="$root/fixtures/torch2/e2e_adam.trace.jsonl.gz"
for c in peak summary events categories graph; do
  check "$c-o-html" 2 "$tmp/o.html: memtl $c writes " -- "$bin" "$c" "$pk" -o "$tmp/o.html"
  grep -qF "memtl export TRACE -o $tmp/o.html writes the HTML report" "$tmp/err" && [ ! -e "$tmp/o.html" ] &&
    pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL $c-o-html: $(cat "$tmp/err")"; }
  "$bin" "$c" "$pk" >"$tmp/o.stdout" 2>/dev/null
  check "$c-o-text" 0 "memtl: wrote $tmp/o.txt" -- "$bin" "$c" "$pk" -o "$tmp/o.txt"
  cmp -s "$tmp/o.txt" "$tmp/o.stdout" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL $c-o-text: differs from stdout"; }
done
check explain-o-html 2 "memtl explain writes text or JSON, not HTML" -- "$bin" explain "$pk" T6 -o "$tmp/o.html"
"$bin" peak "$pk" --format json >"$tmp/o.stdout" 2>/dev/null
check peak-o-json 0 "memtl: wrote $tmp/o.json" -- "$bin" peak "$pk" -o "$tmp/o.json"
cmp -s "$tmp/o.json" "$tmp/o.stdout" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL peak-o-json: not the JSON"; }
"$bin" events "$pk" --format tsv >"$tmp/o.stdout" 2>/dev/null
check events-o-tsv 0 "memtl: wrote $tmp/o.tsv" -- "$bin" events "$pk" -o "$tmp/o.tsv"
cmp -s "$tmp/o.tsv" "$tmp/o.stdout" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL events-o-tsv: not the TSV"; }
check graph-o-json 2 "memtl graph writes text, not JSON" -- "$bin" graph "$pk" -o "$tmp/o.json"
check peak-o-gz 2 "memtl peak writes text, JSON or folded stacks, not gzip" -- "$bin" peak "$pk" -o "$tmp/o.json.gz"
# Folded stacks (flame graphs): every byte alive at the peak, once; -o x.folded writes them.
for f in "$pk" "$root/fixtures/et/e2e_adam.kineto.json.gz" "$root/fixtures/torch2/resnet_bn_sgd_step.trace.jsonl.gz" \
  "$root/fixtures/et/checkpoint_rng.torch.raw.json.gz"; do
  folded=$("$bin" peak "$f" --format folded 2>/dev/null | awk '{s += $NF} END {print s}')
  peak=$("$bin" peak "$f" --format json 2>/dev/null | grep -o '"bytes":[0-9]*' | head -1 | cut -d: -f2)
  [ -n "$peak" ] && [ "$folded" = "$peak" ] && pass=$((pass + 1)) ||
    { fail=$((fail + 1)); echo "FAIL peak-folded-sum $f: $folded != $peak"; }
done
check peak-o-folded 0 "memtl: wrote $tmp/o.folded" -- "$bin" peak "$pk" -o "$tmp/o.folded"
grep -qx "Sequential_0;Linear_1;.weight exp_avg;OPTIMIZER_STATE 65536" "$tmp/o.folded" &&
  grep -qx "aten::mse_loss;ACTIVATION 16384" "$tmp/o.folded" &&
  "$bin" peak "$root/docs/transformer_adamw_3steps.trace.jsonl.gz" --format folded |
  grep -qx "blocks;0;linear1;weight exp_avg;OPTIMIZER_STATE 1048576" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL peak-o-folded: $(head -3 "$tmp/o.folded")"; }
check peak-o-trace 2 "being read; choose another output path" -- "$bin" peak "$pk" -o "$pk"
# The report's flame graph: per device, the stacks of peak --format folded
# (a memtl trace, a Kineto trace with inferred categories, a raw timeline,
# the demo, a CUDA run's two devices), adding up to the device's peak.
for f in "$pk" "$root/fixtures/kineto/e2e_adam.kineto.json.gz" "$root/fixtures/et/checkpoint_rng.torch.raw.json.gz" \
  "$root/docs/transformer_adamw_3steps.trace.jsonl.gz" "$root/fixtures/cuda/mlp_sgd_momentum.trace.jsonl.gz"; do
  if "$bin" export "$f" -o "$tmp/fl.html" --quiet 2>/dev/null && python3 - "$bin" "$f" "$tmp/fl.html" <<'PY'; then
import json, subprocess, sys
bin, trace, page = sys.argv[1:]
html = open(page, encoding="utf-8").read()
start = html.index('<script id="memtl-data" type="application/json">')
data = json.loads(html[html.index(">", start) + 1:html.index("</script>", start)])
assert data["devices"] and html.count('<div class="flame">') == len(data["devices"])
for dev in data["devices"]:
    flame = dev["flame"]
    stacks = sorted(";".join(flame["names"][i] for i in s[2]) + " " + str(s[0]) for s in flame["stacks"])
    assert sum(s[0] for s in flame["stacks"]) == dev["peak"]["bytes"], dev["name"]
    folded = subprocess.run([bin, "peak", trace, "--device", dev["name"], "--format", "folded"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    assert stacks == sorted(folded), (dev["name"], stacks[:3], folded[:3])
    assert all(s[1] in range(8) for s in flame["stacks"])
PY
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL report-flame $f"
  fi
done
# Over budget: the summary is written all the same, then status 3.
"$bin" summary "$pk" -o "$tmp/s.json" --budget total=1KB 2>/dev/null
[ $? -eq 3 ] && grep -q '"peak_bytes"' "$tmp/s.json" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL summary-o-budget"; }
check export-no-output 2 "--output is required (see memtl export --help)" -- \
  "$bin" export "$root/fixtures/dataflow_simple.trace.jsonl.gz"
check unknown-option 2 "(see memtl export --help)" -- \
  "$bin" export "$root/fixtures/dataflow_simple.trace.jsonl.gz" -o "$tmp/u.json" --bogus
# --opt=value; a value that starts with a dash is given that way.
check device-named-h 2 '--device "-h" is not a device' -- \
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
# The export's one suffix table, which the Python package reads: each
# suffix's --format writes what that suffix writes.
formats=$("$bin" --formats)
if python3 -c 'import json, sys; t = json.loads(sys.argv[1])["export"]; assert [s for s, _ in t] == [".html", "raw.json.gz", ".gz", ".json"], t' "$formats"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL formats: $formats"
fi
for pair in raw:t.raw.json.gz json.gz:t.json.gz; do
  "$bin" export "$fx" -o - --format "${pair%%:*}" -q >"$tmp/fmt.out" 2>/dev/null
  if cmp -s <(gzip -dc "$tmp/fmt.out") <(gzip -dc "$tmp/${pair#*:}"); then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL format ${pair%%:*}: -o - differs from -o ${pair#*:}"
  fi
done
check stdout-bad-format 2 "--format" -- "$bin" export "$fx" -o - --format png
check export-several-bad-suffix 2 "unknown output format" -- "$bin" export "$fx" -o "$tmp/b.json" -o "$tmp/b.txt"
[ ! -e "$tmp/b.json" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: wrote b.json before refusing b.txt"; }
if head -c 1 "$tmp/t.json" | grep -q '\[' && gzip -t "$tmp/t.raw.json.gz" && gzip -t "$tmp/t.json.gz" &&
  grep -q "data:image/png;base64," "$tmp/t.html" && grep -q "Who holds the memory at the peak" "$tmp/t.html" &&
  [ "$(grep -c '<tr><td class="n"' "$tmp/t.html")" -ge 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL export contents"; fi
# The HTML export loads nothing at run time (the plot is drawn by memtl):
# a missing trace is the first and only error, and nothing is written.
check export-html-missing-trace 2 "$tmp/nope.trace: cannot open" -- \
  "$bin" export "$tmp/nope.trace" -o "$tmp/nc.html"
[ ! -e "$tmp/nc.html" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL missing trace: wrote $tmp/nc.html"; }
check export-bad-device 2 'device "cuda:3" is not in the trace (devices: cpu)' -- "$bin" export "$fx" -o "$tmp/d.json" --device cuda:3
# The default device is the accelerator whose memory peaks highest (issue
# 31): a ROCm run's hip:0, a DDP rank's cuda:1; never the nearly empty cpu
# (ResolveDevice's choice among several accelerators: test_kineto.cpp).
gpu_fx="$root/fixtures/cuda/host_batches_to_gpu.trace.jsonl.gz"
gunzip -c "$gpu_fx" | sed 's/"cuda:0"/"hip:0"/g' >"$tmp/hip.trace"
gunzip -c "$gpu_fx" | sed 's/"cuda:0"/"cuda:1"/g' >"$tmp/cuda1.trace"
for dev in hip:0 cuda:1; do
  [ "$dev" = hip:0 ] && f="$tmp/hip.trace" || f="$tmp/cuda1.trace"
  for c in peak summary; do
    "$bin" "$c" "$f" >"$tmp/out" 2>/dev/null
    head -1 "$tmp/out" | grep -q "^\(peak of \)\?$dev" && pass=$((pass + 1)) ||
      { fail=$((fail + 1)); echo "FAIL default-device-$c-$dev: $(head -1 "$tmp/out")"; }
  done
  "$bin" export "$f" -o "$tmp/dev.html" 2>/dev/null
  if grep -q "No memory events" "$tmp/dev.html" ||
    ! grep -o '<option[^>]*>[^<]*</option>' "$tmp/dev.html" | head -1 | grep -q "selected>$dev<"; then
    fail=$((fail + 1)); echo "FAIL default-device-html-$dev: not opened on $dev first"
  else pass=$((pass + 1)); fi
done
check export-bad-suffix 2 "unknown output format" -- "$bin" export "$fx" -o "$tmp/d.txt"
check export-same-output-twice 2 "$tmp/d.html: named twice by -o" -- "$bin" export "$fx" -o "$tmp/d.html" -o "$tmp/d.html"
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
python3 -c "import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; n=sum(1 for _ in open(sys.argv[2])); assert len(rows)==n and all('op' in r and 'phase' in r for r in rows) and any(r['shape'] for r in rows) and all(r['shape'] is None for r in rows if r['tensor'] is None)" "$tmp/out" "$tmp/cats.txt" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL events-json"; }
check events-text 0 "" -- "$bin" events "$fx"
# The trace is never an output, whatever the path names it by.
cp "$fx" "$tmp/in.trace.json"
ln -s in.trace.json "$tmp/link.json"
check output-is-trace 2 "being read; choose another output path" -- "$bin" export "$tmp/in.trace.json" -o "$tmp/in.trace.json"
check output-links-to-trace 2 "being read; choose another output path" -- "$bin" export "$tmp/in.trace.json" -o "$tmp/link.json"
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
# Messages cannot be forged (issue 20, item 5): a file name or an argument
# with a newline and an escape sequence is one line, escaped.
esc=$(printf '\033')
evil="$tmp/a
b$esc[2J"
printf 'not json\n' >"$evil.trace"
check quoted-trace-name 2 'a\nb\x1b[2J.trace: line 1: not valid JSON' -- "$bin" graph "$evil.trace"
cp "$root/fixtures/bad/double_free.trace" "$evil.trace"
check quoted-strict-name 2 'a\nb\x1b[2J.trace: --strict: double free' -- "$bin" graph --strict "$evil.trace"
cp "$root/fixtures/bad/truncated_last_line.trace" "$evil.trace"
check quoted-partial-name 0 'a\nb\x1b[2J.trace: the trace is truncated' -- "$bin" graph --partial "$evil.trace"
cp "$fx" "$evil.json"
check quoted-output-name 2 'a\nb\x1b[2J.json: is a file being read' -- "$bin" export "$evil.json" -o "$evil.json"
check quoted-command 2 'unknown command "frob\nnicate\x1b[2J"' -- "$bin" "frob
nicate$esc[2J"
check quoted-option-value 2 "--threads" -- "$bin" graph "$fx" --threads "3
$esc[2J"
rm -f "$evil.trace" "$evil.json"
# Output errors are errors (issue 20, item 6): a full device or a closed
# standard output is one line and status 2 for every command that prints;
# a reader that has gone ends memtl quietly, by SIGPIPE or, where the parent
# blocked it, with status 141.
if [ -w /dev/full ]; then
  for c in graph categories events peak; do
    check "$c-to-full-device" 2 "standard output: cannot write: No space left on device" -- \
      bash -c '"$0" "$1" "$2" >/dev/full' "$bin" "$c" "$fx"
  done
  check help-to-full-device 2 "standard output: cannot write" -- bash -c '"$0" --help >/dev/full' "$bin"
fi
check graph-stdout-closed 2 "standard output: cannot write: Bad file descriptor" -- \
  bash -c '"$0" graph "$1" >&-' "$bin" "$fx"
for c in graph events; do
  for mode in default blocked ignored; do
    want=141
    [ "$mode" = default ] && want=-13
    got=$(python3 - "$bin" "$c" "$fx" "$mode" <<'PY'
import os, signal, subprocess, sys
memtl, cmd, trace, mode = sys.argv[1:5]
r, w = os.pipe()
os.close(r)  # the reader has gone before memtl writes
pre = None
if mode == "blocked":
    pre = lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
if mode == "ignored":  # as nohup and `trap '' PIPE` leave it: memtl keeps it ignored
    pre = lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN)
p = subprocess.run([memtl, cmd, trace], stdout=w, stderr=subprocess.PIPE, preexec_fn=pre)
print(p.returncode if not p.stderr else "stderr: " + p.stderr.decode())
PY
    )
    if [ "$got" = "$want" ]; then pass=$((pass + 1)); else
      fail=$((fail + 1))
      echo "FAIL $c-reader-gone-$mode: $got (want $want, nothing on stderr)"
    fi
  done
done
# Small stacks (issue 20, item 7; docs/reliability.md): every export of
# every fixture runs with a 256 KiB stack limit, which glibc also gives the
# threads memtl starts. No large buffer lives on a stack: with 64 KiB,
# where the writer thread's 64 KiB gzip buffer crashed memtl, the exports
# of the largest fixture still run (not under the sanitizers, whose frames
# are larger). A fixture's notes (the diagnostics it is known for) are
# left out of the one line checked.
for f in "$root"/fixtures/*.trace.jsonl.gz "$root"/fixtures/torch2/*.trace.jsonl.gz; do
  check "stack-256k-$(basename "$(dirname "$f")")-$(basename "$f")" 0 "memtl: wrote" -- \
    bash -c 'ulimit -s 256 && set -o pipefail && "$0" export "$1" -o "$2.json" -o "$2.raw.json.gz" -o "$2.json.gz" -o "$2.html" 2>&1 >/dev/null | { grep -v "^memtl: note: " >&2 || true; }' \
    "$bin" "$f" "$tmp/stack"
done
if (ulimit -v 1048576 && "$bin" --version) >/dev/null 2>&1; then
  check stack-64k 0 "memtl: wrote" -- \
    bash -c 'ulimit -s 64 && exec "$0" export "$1" -o "$2.json" -o "$2.raw.json.gz" -o "$2.json.gz" -o "$2.html"' \
    "$bin" "$(ls -S "$root"/fixtures/*.trace.jsonl.gz | head -1)" "$tmp/stack"
fi
# The progress line (cli/progress_line.h): on a terminal (script(1) gives one),
# a run longer than a second says what it is doing, and the line is erased
# before the result line; with stderr not a terminal, only the result line.
if command -v script >/dev/null; then
  gzip -dc "$(ls -S "$root"/fixtures/*.trace.jsonl.gz | head -1)" >"$tmp/slow.jsonl"
  slow='{ head -c 20000 "$0"; sleep 1.5; tail -c +20001 "$0"; } | "$1" export - -o "$2"'
  script -qec "bash -c '$slow' '$tmp/slow.jsonl' '$bin' '$tmp/slow.json'" /dev/null \
    >"$tmp/tty" 2>&1 </dev/null
  if grep -qa 'memtl: reading standard input (' "$tmp/tty" &&
    grep -qa $'\r\033\\[Kmemtl: wrote' "$tmp/tty"; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL progress-line: $(tr '\r\033' '|~' <"$tmp/tty" | head -c 400)"
  fi
  check progress-no-tty 0 "memtl: wrote" -- bash -c "$slow" "$tmp/slow.jsonl" "$bin" "$tmp/slow2.json"
fi
# memtl explain: why a tensor has its category (the pass and its rule).
ex="$root/fixtures/torch2/resnet_bn_sgd_step.trace.jsonl.gz"
out=$("$bin" explain "$ex" T50:v0)
json=$("$bin" explain "$ex" T12 --format json)
if grep -q 'parameters from the python tracer: unknown -> PARAMETER' <<<"$out" &&
  grep -qF '  shape: [16, 16, 3, 3] float32' <<<"$out" &&
  grep -qF '"shape":"[2, 8, 16, 16] float32"' <<<"$json" &&
  [ "${json:0:20}" = '{"tensor":"T12(v0)",' ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL explain: $("$bin" explain "$ex" T50:v0 2>&1 | head -3)"
fi
check explain-bad-ref 2 'not a tensor: "T1x"' -- "$bin" explain "$ex" T1x
check explain-no-tensor 2 "no tensor T99999 in the trace" -- "$bin" explain "$ex" T99999
check explain-no-version 2 "T12 has no version 9" -- "$bin" explain "$ex" T12:v9
# memtl summary, --budget (status 3 when over) and memtl diff.
check summary-budget-over 3 "budget exceeded: ACTIVATION on cpu" -- \
  "$bin" summary "$ex" --budget ACTIVATION=64KiB --budget total=1GB
check summary-budget-holds 0 "" -- "$bin" summary "$ex" --budget total=1GB --format json
check summary-budget-bad 2 "--budget GRADIENT=1parsec: unknown unit" -- \
  "$bin" summary "$ex" --budget GRADIENT=1parsec
if "$bin" diff "$ex" "$ex" | grep -q '^  peak .* 0 B$' &&
  "$bin" diff "$ex" "$ex" --format json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["a"] == d["b"]'; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL diff-self: $("$bin" diff "$ex" "$ex" 2>&1 | head -5)"
fi
# memtl diff as an HTML page, written atomically with -o; never over a trace.
ex2="$root/fixtures/torch2/e2e_fwd_bwd_sgd.trace.jsonl.gz"
if "$bin" diff "$ex" "$ex2" -o "$tmp/diff.html" 2>"$tmp/diff.err" &&
  grep -q '<svg class="bars"' "$tmp/diff.html" && grep -q 'Content-Security-Policy' "$tmp/diff.html" &&
  grep -q "memtl: wrote .*diff.html" "$tmp/diff.err" &&
  "$bin" diff "$ex" "$ex2" --format html | cmp -s - "$tmp/diff.html"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL diff-html: $(cat "$tmp/diff.err")"
fi
# A Kineto trace beside memtl's own trace of the same run: the diff says
# which side's categories are inferred (text and page), and the Kineto
# side's ops hold its bytes at the peak (the inference pairs its frees).
kin="$root/fixtures/kineto/e2e_adam.kineto.json.gz"
own="$root/fixtures/et/e2e_adam.trace.jsonl.gz"
if "$bin" diff "$kin" "$own" >"$tmp/kdiff.txt" 2>&1 &&
  grep -q '^A: .*(categories inferred' "$tmp/kdiff.txt" && ! grep -q '^B: .*inferred' "$tmp/kdiff.txt" &&
  ! grep -q 'no tensor identity' "$tmp/kdiff.txt" &&
  "$bin" diff "$kin" "$own" --format html | grep -q 'categories inferred' &&
  "$bin" summary "$kin" | grep -q '^ *96.0 KiB  aten::mm$'; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL diff-kineto: $(head -20 "$tmp/kdiff.txt")"
fi
# The same Kineto trace joined to its execution trace (--et for A, --et-b
# for B): proven categories, equal to memtl's own trace's but the
# optimizer state the python tracer alone names.
if "$bin" diff "$root/fixtures/et/e2e_adam.kineto.json.gz" --et "$root/fixtures/et/e2e_adam.et.json.gz" \
  "$own" >"$tmp/ediff.txt" 2>"$tmp/ediff.err" &&
  ! grep -q 'inferred' "$tmp/ediff.txt" && grep -q '^  peak .* 0 B$' "$tmp/ediff.txt" &&
  grep -q '^  GRADIENT .* 0 B$' "$tmp/ediff.txt" && grep -q 'joined 233 of 233 ops' "$tmp/ediff.err" &&
  "$bin" diff "$own" "$root/fixtures/et/e2e_adam.kineto.json.gz" \
    --et-b "$root/fixtures/et/e2e_adam.et.json.gz" 2>/dev/null | grep -q '^  peak .* 0 B$'; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL diff-et: $(head -12 "$tmp/ediff.txt") $(cat "$tmp/ediff.err")"
fi
cp "$ex2" "$tmp/b.trace.jsonl.gz"
check diff-over-trace 2 "being read; choose another output path" -- "$bin" diff "$ex" "$tmp/b.trace.jsonl.gz" -o "$tmp/b.trace.jsonl.gz"
# A Kineto trace alone records no tensors: its categories are inferred
# (core/infer/) and every output says so; the exports keep PyTorch's
# category numbers. Goldens: tests/golden/kineto/.
kt="$root/fixtures/kineto/e2e_adam.kineto.json.gz"
for what in peak categories; do
  if "$bin" "$what" "$kt" 2>/dev/null | cmp -s - "$root/tests/golden/kineto/e2e_adam.$what"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL kineto-$what: differs from tests/golden/kineto/e2e_adam.$what"
  fi
done
if "$bin" explain "$kt" A19 2>/dev/null | grep -qF '  category: GRADIENT (inferred)' &&
  "$bin" explain "$kt" A19 2>/dev/null | grep -qF 'decided by: inference rule "outlives backward"' &&
  ! "$bin" explain "$kt" A19 2>/dev/null | grep -q '\.cpp' &&
  "$bin" summary "$kt" 2>/dev/null | grep -q '^  OPTIMIZER_STATE (inferred) ' &&
  "$bin" export "$kt" -o "$tmp/k.html" -o "$tmp/k.raw.json.gz" 2>/dev/null &&
  grep -q 'Categories are inferred' "$tmp/k.html" && grep -q '"inferred":true' "$tmp/k.html" &&
  ! grep -q '"reserved":' "$tmp/k.html" &&
  gzip -dc "$tmp/k.raw.json.gz" | python3 -c 'import json,sys; assert {r[3] for r in json.load(sys.stdin)} >= {1, 2, 3, 4, 5, 7}'; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL kineto-inferred: $("$bin" explain "$kt" A19 2>&1 | head -3)"
fi
check kineto-explain-tensor 2 "the trace records no tensors (a Kineto trace)" -- "$bin" explain "$kt" T1
check kineto-explain-no-alloc 2 "no allocation A99999 in the trace" -- "$bin" explain "$kt" A99999
# Where the trace has "Total Reserved" (a CUDA run), the report draws it as
# a line of its own; memtl's own traces and --et joins stay proven.
kc="$root/fixtures/et/cuda/mlp_sgd_momentum"
if "$bin" export "$kc.kineto.json.gz" -o "$tmp/kc.html" 2>/dev/null &&
  grep -q '"reserved":\[\[0,96468992\]\]' "$tmp/kc.html" && grep -q "black line is the allocator's reserved" "$tmp/kc.html" &&
  "$bin" peak "$kc.kineto.json.gz" 2>/dev/null | grep -qF 'the allocator reserved at most 92.0 MiB' &&
  "$bin" export "$root/fixtures/et/e2e_adam.kineto.json.gz" --et "$root/fixtures/et/e2e_adam.et.json.gz" -o "$tmp/et.html" 2>/dev/null &&
  ! grep -q 'Categories are inferred' "$tmp/et.html" &&
  ! "$bin" peak "$root/fixtures/et/e2e_adam.trace.jsonl.gz" 2>/dev/null | grep -q 'inferred'; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL kineto-reserved"
fi
# memtl ranks (issue 31, item 5): a run's ranks, made from fixtures whose
# headers are given a rank, a world size and a run; rank 1 holds more.
rk="$tmp/ranks"
mkdir -p "$rk"
rank_trace() {  # rank_trace FIXTURE RANK WORLD RUN OUT
  gunzip -c "$root/fixtures/torch2/$1.trace.jsonl.gz" |
    sed "1s/}\$/,\"rank\":$2,\"world_size\":$3,\"run\":\"$4\"}/" >"$5"
}
rank_trace e2e_fwd_bwd_sgd 0 3 job1 "$rk/r0.trace.jsonl"
rank_trace e2e_adam 1 3 job1 "$rk/r1.trace.jsonl"
rank_trace e2e_fwd_bwd_sgd 2 3 job1 "$rk/r2.trace.jsonl"
check ranks-json 0 "" -- "$bin" ranks "$rk" --format json -q
if python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert [x["rank"] for x in r["ranks"]] == [0, 1, 2], r
assert r["outliers"] == [1] and r["skew"] > 1 and r["median_peak_bytes"] == r["ranks"][0]["peak_bytes"], r
assert all(x["device"] == "cpu" and not x["truncated"] for x in r["ranks"]), r
' "$tmp/out"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL ranks-json: $(head -c 400 "$tmp/out")"; fi
check ranks-html 0 "wrote $rk.html (3 ranks)" -- "$bin" ranks "$rk/r*.trace.jsonl" -o "$rk.html"
[ "$(grep -c '<polyline' "$rk.html")" -eq 3 ] && grep -q "Outliers (more than 10% from the median): rank 1" "$rk.html" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL ranks-html: not 3 curves and rank 1 named"; }
cp "$rk/r1.trace.jsonl" "$tmp/again.trace.jsonl"
check ranks-twice 2 "rank 1 twice: $tmp/again.trace.jsonl, $rk/r1.trace.jsonl" -- \
  "$bin" ranks "$rk" "$tmp/again.trace.jsonl"
rank_trace e2e_adam 3 4 job1 "$tmp/w4.trace.jsonl"
check ranks-world-sizes 2 "traces of different world sizes (world size 3:" -- "$bin" ranks "$rk" "$tmp/w4.trace.jsonl"
rank_trace e2e_adam 2 3 job2 "$tmp/job2.trace.jsonl"
check ranks-runs 2 "traces of different runs (run \"job1\":" -- "$bin" ranks "$rk/r0.trace.jsonl" "$tmp/job2.trace.jsonl"
check ranks-no-match 2 "no file matches this pattern" -- "$bin" ranks "$tmp/none*.trace"
# A rank cut off is analyzed up to its last complete record and said so;
# the others are analyzed as ever.
head -c 20000 "$rk/r2.trace.jsonl" >"$rk/r2.cut" && mv "$rk/r2.cut" "$rk/r2.trace.jsonl"
"$bin" ranks "$rk" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "^2 .*(truncated: analyzed up to line" "$tmp/out" && grep -q "^0 .*r0.trace.jsonl" "$tmp/out" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL ranks-truncated: $(cat "$tmp/out" "$tmp/err")"; }
# peak's --top defaults to 20 (summary's own default, 10, once overwrote
# it), and --top 0 prints no table.
"$bin" peak "$root/fixtures/resnet18_sgd_step.trace.jsonl.gz" >"$tmp/out" 2>/dev/null
[ "$(grep -c "^ *[0-9.]* [KMG]\?i\?B  [A-Z]" "$tmp/out")" -eq 20 ] && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL peak-top-default: $(grep -c "^ *[0-9.]* [KMG]\?i\?B  [A-Z]" "$tmp/out") rows"; }
"$bin" peak "$root/fixtures/resnet18_sgd_step.trace.jsonl.gz" --top 0 >"$tmp/out" 2>/dev/null
! grep -q "largest tensors" "$tmp/out" && grep -q "^by category:" "$tmp/out" && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL peak-top-0: $(cat "$tmp/out")"; }
# A real run's ranks: ZeroRedundancyOptimizer at world size 2 (fixtures,
# recorded by tests/python/distributed_runs.py, each rank equal to PyTorch).
check ranks-zero 0 "" -- "$bin" ranks "$root/fixtures/torch2/zero_adam.rank*" --format json -q
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert [x["rank"] for x in r["ranks"]] == [0, 1] and {x["world_size"] for x in r["ranks"]} == {2}, r
assert len({x["run"] for x in r["ranks"]}) == 1, r
' "$tmp/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL ranks-zero: $(head -c 300 "$tmp/out")"; }
# A storage freed unrecorded and then written, whose address is allocated
# twice more (PyTorch: "version mismatch"): split at each reuse, three
# storages in all (docs/categories.md, "Storages freed unseen").
cat >"$tmp/reused.trace" <<'TRACE'
{"format": "memtl-trace", "version": 1, "producer": "bad-corpus", "ids": false, "profile_memory": true}
{"k": "op", "i": 0, "p": -1, "name": "aten::zero_", "t0": 1, "t1": 2, "tid": 1, "scope": "function", "seq": -1, "args": [{"impl": 1, "ptr": 100, "id": null, "aid": null, "dev": "cpu", "dtype": "float32", "layout": "strided", "sizes": [4], "strides": [1]}]}
{"k": "op", "i": 1, "p": -1, "name": "aten::empty", "t0": 3, "t1": 4, "tid": 1, "scope": "function", "seq": -1, "args": []}
{"k": "alloc", "i": 2, "p": 1, "t": 3, "tid": 1, "ptr": 100, "bytes": 16, "dev": "cpu", "total_allocated": 16, "total_reserved": 0, "id": null, "aid": null}
{"k": "op", "i": 3, "p": -1, "name": "aten::zero_", "t0": 5, "t1": 6, "tid": 1, "scope": "function", "seq": -1, "args": [{"impl": 2, "ptr": 100, "id": null, "aid": null, "dev": "cpu", "dtype": "float32", "layout": "strided", "sizes": [4], "strides": [1]}]}
{"k": "op", "i": 4, "p": -1, "name": "aten::empty", "t0": 7, "t1": 8, "tid": 1, "scope": "function", "seq": -1, "args": []}
{"k": "alloc", "i": 5, "p": 4, "t": 7, "tid": 1, "ptr": 100, "bytes": 16, "dev": "cpu", "total_allocated": 16, "total_reserved": 0, "id": null, "aid": null}
{"k": "op", "i": 6, "p": -1, "name": "aten::zero_", "t0": 9, "t1": 10, "tid": 1, "scope": "function", "seq": -1, "args": [{"impl": 3, "ptr": 100, "id": null, "aid": null, "dev": "cpu", "dtype": "float32", "layout": "strided", "sizes": [4], "strides": [1]}]}
TRACE
"$bin" categories "$tmp/reused.trace" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "split in two (2x" "$tmp/err" && [ "$(grep -c "^create  *T[12](v0)" "$tmp/out")" -eq 2 ] &&
  [ "$(grep -c "^destroy  *T[01](v1)" "$tmp/out")" -eq 2 ] && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL storage-reused-twice: $(cat "$tmp/err" "$tmp/out")"; }
# Split storages need a second read: from a pipe it cannot be had, and
# memtl says so; standard input redirected from a file reads twice.
check split-from-pipe 2 "which a pipe cannot give: pass the trace as a file" -- \
  bash -c 'gunzip -c "$0" | "$1" peak -' "$root/fixtures/torch2/ddp_static_graph.trace.jsonl.gz" "$bin"
"$bin" peak - <"$root/fixtures/torch2/ddp_static_graph.trace.jsonl.gz" 2>/dev/null | grep -q "^peak of cpu" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL split-from-redirected-stdin"; }
# The model's names (the header's "model", memtl.save(..., model=)) hold
# any characters: a row of the text and TSV tables stays a row, JSON reads
# the name back exactly, the report shows no markup from it.
python3 - "$root/fixtures/torch2/e2e_adam.trace.jsonl.gz" "$tmp/weird.trace" <<'PY'
import gzip, json, sys
lines = gzip.open(sys.argv[1], "rt").read().split("\n")
head = json.loads(lines[0])
head["model"] = []
for line in lines[1:]:
    if '"module"' in line:
        for p in json.loads(line)["module"]["params"]:
            head["model"].append({"name": 'x\n<script>alert(1)</script>\t"%d.%s' % (len(head["model"]), p["name"]),
                                  "ptr": p["t"]["ptr"], "dev": p["t"]["dev"]})
open(sys.argv[2], "w").write(json.dumps(head) + "\n" + "\n".join(lines[1:]))
PY
if "$bin" peak "$tmp/weird.trace" >"$tmp/w.txt" 2>/dev/null && grep -qF 'x\n<script>alert(1)</script>\t"0.weight grad' "$tmp/w.txt" &&
  ! grep -q '^<script>' "$tmp/w.txt" &&
  "$bin" events --format tsv "$tmp/weird.trace" 2>/dev/null | awk -F'\t' 'NF != 12 { bad = 1 } END { exit bad }' &&
  "$bin" peak --format json "$tmp/weird.trace" 2>/dev/null |
  python3 -c 'import json,sys; assert any(t["name"] == "x\n<script>alert(1)</script>\t\"0.weight grad" for t in json.load(sys.stdin)["largest"])' &&
  "$bin" export "$tmp/weird.trace" -o "$tmp/weird.html" 2>/dev/null && ! grep -q "<script>alert" "$tmp/weird.html" &&
  grep -qF '&lt;script&gt;alert(1)&lt;/script&gt;' "$tmp/weird.html"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL model-names-escaped: $(head -c 600 "$tmp/w.txt")"
fi
# memtl fit refuses what it cannot fit, in one line (docs/planning.md); the
# validation against real runs is tests/python/test_plan.py.
fx="$root/fixtures/torch2"
check fit-one-trace 2 "fit needs runs at 2 or more different batch sizes" -- \
  "$bin" fit "$fx/e2e_adam.trace.jsonl.gz"
check fit-same-scale 2 "got 1" -- "$bin" fit "$fx/e2e_adam.trace.jsonl.gz" "$fx/e2e_adam.trace.jsonl.gz"
check fit-models 2 "runs of different models cannot be fitted together" -- \
  "$bin" fit "$fx/e2e_adam.trace.jsonl.gz" "$fx/resnet_bn_sgd_step.trace.jsonl.gz" --scale 2,4
check fit-scale-count 2 "--scale gives 1 scales for 2 traces" -- \
  "$bin" fit "$fx/e2e_adam.trace.jsonl.gz" "$fx/e2e_adam.trace.jsonl.gz" --scale 2
check fit-budget 2 "--budget" -- \
  "$bin" fit "$fx/e2e_adam.trace.jsonl.gz" "$fx/e2e_adam.trace.jsonl.gz" --scale 2,4 --budget lots
"$bin" fit "$fx/e2e_adam.trace.jsonl.gz" "$fx/e2e_adam.trace.jsonl.gz" --scale 4,2 --at 1e30 --format json 2>/dev/null |
  python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"][0]; assert d["predicted_peak_bytes"] is None' &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL fit-no-number: a prediction past int64 must be null"; }
check fit-two-scales 0 "" -- \
  "$bin" fit "$fx/e2e_adam.trace.jsonl.gz" "$fx/e2e_adam.trace.jsonl.gz" --scale 2,4 --at 8 --budget 1GiB

# memtl whatif: refusals in one line before any analysis where it can, and
# the three outputs (docs/planning.md).
t2="$fx/e2e_adam.trace.jsonl.gz"
check whatif-no-change 2 "no change to replay" -- "$bin" whatif "$t2"
check whatif-shard-kind 2 "KIND is optimizer, grads or params" -- "$bin" whatif "$t2" --shard states=4
check whatif-shard-count 2 "write KIND=N" -- "$bin" whatif "$t2" --shard optimizer=1
check whatif-dtype 2 "DTYPE is bf16" -- "$bin" whatif "$t2" --dtype params=int3
check whatif-both 2 "--set-to-none and --no-set-to-none: give one" -- \
  "$bin" whatif "$t2" --set-to-none --no-set-to-none
check whatif-wrap-alone 2 "--wrap names the units" -- "$bin" whatif "$t2" --wrap 'Linear_*'
check whatif-optimizer 2 "not one memtl knows" -- "$bin" whatif "$t2" --optimizer lamb
check whatif-no-module 2 "no module call matches" -- "$bin" whatif "$t2" --checkpoint 'NoSuch_*'
check whatif-needs-wrap 2 "needs --wrap" -- "$bin" whatif "$t2" --shard params=8
check whatif-no-grads 2 "the trace has no GRADIENT bytes" -- \
  "$bin" whatif "$fx/e2e_inference.trace.jsonl.gz" --set-to-none
cp "$t2" "$tmp/in.trace.jsonl.gz"
check whatif-output-is-input 2 "being read; choose another output path" -- \
  "$bin" whatif "$tmp/in.trace.jsonl.gz" --optimizer sgd -o "$tmp/in.trace.jsonl.gz"
check whatif-text 0 "" -- "$bin" whatif "$t2" --optimizer sgd --shard optimizer=4 --dtype params=bf16
check whatif-html 0 "wrote" -- "$bin" whatif "$t2" --optimizer sgd -o "$tmp/w.html"
grep -q "<polyline" "$tmp/w.html" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL whatif-html: no chart"; }
"$bin" whatif "$t2" --optimizer sgd -o "$tmp/w.json" 2>/dev/null &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["devices"][0]; assert d["peak_bytes"]["after"] < d["peak_bytes"]["before"]' "$tmp/w.json" &&
  pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL whatif-json: the peak after must be lower"; }

# Nothing lost, round 2 (issue 34). An output never replaces an input, by
# any name: standard input, /proc/self/fd/0, --et, a hard link.
fx="$root/fixtures/dataflow_simple.trace.jsonl.gz"
cp "$root/fixtures/dataflow_simple.trace.jsonl.gz" "$tmp/stdin.json"
sum_before=$(cksum <"$tmp/stdin.json")
check stdin-is-output 2 "being read; choose another output path" -- \
  bash -c '"$0" export - -o "$1" <"$1"' "$bin" "$tmp/stdin.json"
check stdin-is-output-proc 2 "being read; choose another output path" -- \
  bash -c '"$0" diff - "$1" -o /proc/self/fd/0 <"$2"' "$bin" "$fx" "$tmp/stdin.json"
ln "$tmp/stdin.json" "$tmp/hard.json"
check hard-link-is-output 2 "being read; choose another output path" -- \
  "$bin" export "$tmp/stdin.json" -o "$tmp/hard.json"
[ "$(cksum <"$tmp/stdin.json")" = "$sum_before" ] && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL stdin-is-output: the input changed"; }
cp "$root/fixtures/et/e2e_adam.et.json.gz" "$tmp/et.json.gz"
check et-is-output 2 "being read; choose another output path" -- \
  "$bin" peak "$root/fixtures/et/e2e_adam.kineto.json.gz" --et "$tmp/et.json.gz" -o "$tmp/et.json.gz"
check et-b-is-output 2 "being read; choose another output path" -- \
  "$bin" diff "$fx" "$root/fixtures/et/e2e_adam.kineto.json.gz" --et-b "$tmp/et.json.gz" \
  -o "$tmp/et.json.gz"
# A link to a file not there yet is followed, as a shell's `>` follows it:
# the file appears at its end and the link stays.
ln -s "$tmp/made-by-link.json" "$tmp/dangling.json"
check dangling-link 0 "wrote" -- "$bin" export "$fx" -o "$tmp/dangling.json"
[ -L "$tmp/dangling.json" ] && [ -s "$tmp/made-by-link.json" ] && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL dangling-link: the link was replaced"; }
# /dev/stdout with standard output closed leads to a link to nothing in
# /proc: refused before any work, and /dev/stdout stays a link (as root it
# was replaced by a regular file).
if [ -L /dev/stdout ]; then
  check dev-stdout-closed 2 "/dev/stdout: cannot write" -- \
    bash -c '"$0" peak "$1" -o /dev/stdout >&-; rc=$?; test -L /dev/stdout && exit $rc' "$bin" "$fx"
fi
# A named pipe is written in place, and stays a pipe.
mkfifo "$tmp/fifo.json"
cat "$tmp/fifo.json" >"$tmp/from-fifo" &
check fifo-output 0 "wrote" -- timeout 60 "$bin" export "$fx" -o "$tmp/fifo.json"
wait
[ -p "$tmp/fifo.json" ] && [ -s "$tmp/from-fifo" ] && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL fifo-output: not written in place"; }
# Every output of a run, or none: an output that cannot be written fails
# before the analysis, and leaves the others unwritten.
check half-a-result 2 "/no/such/dir/x.html: cannot write" -- \
  "$bin" export "$fx" -o "$tmp/first.json" -o /no/such/dir/x.html
[ ! -e "$tmp/first.json" ] && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL half-a-result: first.json left behind"; }
check output-is-directory 2 "is a directory" -- "$bin" peak "$fx" -o "$tmp"
# Sizes are read whole or refused.
for size in 1..5GB 1.2.3MB . 1.GB .5GB 5GBx; do
  check "budget-$size" 2 "--budget total=$size" -- "$bin" summary "$fx" --budget "total=$size"
done
check budget-decimal 0 "" -- "$bin" summary "$fx" --budget total=1.5GB
# Every JSON output is UTF-8: a name from a foreign trace with bytes that
# are not, and a file name that is not, read as U+FFFD there, and the names
# are counted in a note.
python3 - "$root/fixtures/kineto/e2e_adam.kineto.json.gz" "$tmp/bad-utf8.json" <<'PY'
import gzip, sys
raw = gzip.open(sys.argv[1]).read()
open(sys.argv[2], "wb").write(raw.replace(b'"name": "aten::', b'"name": "aten\xff::'))
PY
cp "$tmp/bad-utf8.json" "$tmp/bad-name-"$'\xff'".json"
for c in summary peak; do
  check "$c-json-utf8" 0 "name that is not valid UTF-8: its bad bytes read as U+FFFD" -- \
    bash -c '"$0" "$1" "$2" --format json >"$3"' "$bin" "$c" "$tmp/bad-name-"$'\xff'".json" "$tmp/u.json"
  python3 -c 'import json,sys; json.loads(open(sys.argv[1],"rb").read().decode("utf-8"))' "$tmp/u.json" &&
    pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL $c-json-utf8: not UTF-8 JSON"; }
done
grep -q "aten"$'\xef\xbf\xbd'"::" "$tmp/u.json" && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL json-utf8: the name is gone"; }
# --device is a device by PyTorch's rule for every input: a raw timeline,
# which names none, took any text as its name.
raw="$root/fixtures/kineto/pytorch-export-memory-timeline.raw.json.gz"
check raw-device-not-a-device 2 "is not a device" -- \
  "$bin" export "$raw" --device "not a device at all" -o "$tmp/raw.json"
[ ! -e "$tmp/raw.json" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL raw-device: output left"; }
check raw-device-cuda 0 "wrote" -- "$bin" export "$raw" --device cuda:1 -o "$tmp/raw.json"
# A raw timeline names no op or tensor: the commands that read them refuse
# it in one line; the summary has its categories and no op or module table.
for cmd in "explain $raw T1" "events $raw" "categories $raw" "graph $raw" "whatif $raw --optimizer sgd"; do
  # shellcheck disable=SC2086
  check "raw-refused-${cmd%% *}" 2 "a PyTorch raw memory timeline holds sizes by category only" -- "$bin" $cmd
done
"$bin" summary "$raw" >"$tmp/raw.summary" 2>&1 && grep -q "ACTIVATION" "$tmp/raw.summary" &&
  ! grep -q "holding the most" "$tmp/raw.summary" && pass=$((pass + 1)) ||
  { fail=$((fail + 1)); echo "FAIL raw-summary: $(cat "$tmp/raw.summary")"; }
check trace-device-not-a-device 2 "is not a device" -- "$bin" peak "$fx" --device "cuda:x"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
