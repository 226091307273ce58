#!/usr/bin/env bash
# Runs memtl on every entry of fixtures/bad/MANIFEST and checks the exit
# status, the one-line message, and that a failed run leaves no output file.
# Also runs a generated 10^6-deep event tree (too big to commit).
set -u
root="$1"
bin="${MEMTL:?set MEMTL to the memtl binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
n=0
while IFS='|' read -r file args status message; do
  file=$(echo "$file" | xargs)
  case "$file" in "" | "#"*) continue ;; esac
  n=$((n + 1))
  status=$(echo "$status" | xargs)
  message=$(echo "$message" | sed 's/^ *//; s/ *$//')
  out="$tmp/out$n"
  # shellcheck disable=SC2086
  set -- $(echo "$args" | sed "s|{out}|$out|g")
  cmd="$1"
  shift
  "$bin" "$cmd" "$root/fixtures/bad/$file" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  got=$?
  # One line of message; a successful export adds its result line.
  lines=$(grep -vc "^memtl: wrote " "$tmp/stderr")
  ok=1
  [ "$got" -eq "$status" ] || ok=0
  if [ -n "$message" ]; then grep -qF -- "$message" "$tmp/stderr" || ok=0; fi
  [ "$lines" -le 1 ] || ok=0
  if [ "$got" -ne 0 ] && ls "$tmp" | grep -q "^out$n\|^\.out$n"; then ok=0; echo "  left an output file behind"; fi
  if [ "$got" -eq 0 ] && [ "$cmd" = export ] && [ ! -s "$out.json" ]; then ok=0; echo "  wrote no output"; fi
  if [ "$ok" -eq 1 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $file ($args): status $got (want $status); stderr: $(head -c 300 "$tmp/stderr")"
  fi
done <"$root/fixtures/bad/MANIFEST"

# A 10^6-deep chain of nested ops must not overflow any stack.
python3 - "$tmp/deep.trace" <<'PY'
import sys
n = 1000000
with open(sys.argv[1], "w") as f:
    f.write('{"format":"memtl-trace","version":1,"profile_memory":true}\n')
    for i in range(n):
        f.write('{"k":"op","i":%d,"p":%d,"name":"user_scope","t0":%d,"t1":%d,"scope":"user_scope","args":[]}\n'
                % (i, i - 1, i, 2 * n - i))
    f.write('{"k":"alloc","i":%d,"p":%d,"t":%d,"ptr":64,"bytes":16,"dev":"cpu"}\n' % (n, n - 1, n))
PY
if "$bin" export "$tmp/deep.trace" -o "$tmp/deep.json" 2>"$tmp/stderr" && [ -s "$tmp/deep.json" ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL deep nesting: $(head -c 300 "$tmp/stderr")"
fi
# Bounded memory (docs/reliability.md). A sanitizer build maps terabytes of
# shadow memory, so it runs no memory limit and no resident-size bound.
limits=1
(ulimit -v 1048576 && "$bin" --version) >/dev/null 2>&1 || limits=0
check() {  # NAME OK: counts one check
  if [ "$2" -eq 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1"; fi
}
# Runs memtl with the given arguments (stderr in $tmp/stderr), for 60
# seconds at most (status 124 then); sets rc and rss, its peak resident
# memory in MiB.
measure() {
  read -r rc rss < <(python3 - "$tmp/stderr" "$bin" "$@" <<'PY'
import resource, subprocess, sys
with open(sys.argv[1], "w") as err:
    try:
        rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=err, timeout=60).returncode
    except subprocess.TimeoutExpired:
        rc = 124
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
PY
  )
}
one_line() { [ "$(grep -vc "^memtl: wrote " "$tmp/stderr")" -eq 1 ]; }
has() { grep -qF -- "$1" "$tmp/stderr"; }
small() { [ "$limits" -eq 0 ] || [ "$rss" -lt "$1" ]; }

# A 1 GiB line in 1 MB of gzip: refused at 64 MiB, not after reading it
# (it took 2 GiB), and under a 1 GiB address-space limit (it aborted).
python3 - "$tmp/long.trace.gz" <<'PY'
import gzip, sys
with gzip.open(sys.argv[1], "wb", compresslevel=1) as f:
    f.write(b'{"format":"memtl-trace","version":1,"profile_memory":true}\n{"k":"other","i":0,"p":-1,"t0":0,"name":"')
    chunk = b"a" * (1 << 20)
    for _ in range(1024):
        f.write(chunk)
    f.write(b'"}\n')
PY
for threads in 1 2; do
  measure export --threads "$threads" "$tmp/long.trace.gz" -o "$tmp/long.json"
  ok=0
  [ "$rc" -eq 2 ] && one_line && has "long.trace.gz: line 2: line longer than 64 MiB" && small 100 && ok=1
  check "1 GiB line, --threads $threads: status $rc, ${rss} MiB: $(head -c 200 "$tmp/stderr")" $ok
done
# Endless input: stops at the limit at the latest, as not JSON.
measure export /dev/zero -o "$tmp/zero.json"
ok=0
[ "$rc" -eq 2 ] && one_line && has "/dev/zero: line 1: not valid JSON (column 1" && small 100 && ok=1
check "/dev/zero: status $rc, ${rss} MiB: $(head -c 200 "$tmp/stderr")" $ok
# Memory that runs out, on the reader thread or any other, is one line and
# status 2, never an abort: address-space limits from 8 MiB (no thread can
# be started) to 1 GiB, on the long line and on a good trace.
if [ "$limits" -eq 1 ]; then
  good=$(ls -S "$root"/fixtures/*.trace.jsonl.gz | head -1)
  for kib in 8192 12288 16384 32768 65536 98304 1048576; do
    # A limit under which the binary cannot even be loaded (the dynamic
    # loader maps libc and the binary first: status 127) tests the loader,
    # not memtl: it is skipped, and said.
    if ! (ulimit -v "$kib" && exec "$bin" --version) >/dev/null 2>&1; then
      echo "note: ulimit -v $kib: memtl cannot be loaded at all; skipped"
      continue
    fi
    for threads in 1 2; do
      for input in "$tmp/long.trace.gz" "$good"; do
        (ulimit -v "$kib" && exec "$bin" export --threads "$threads" "$input" -o "$tmp/lim.json" -o "$tmp/lim.html") 2>"$tmp/stderr" >/dev/null
        rc=$?
        ok=0
        if [ "$input" = "$good" ]; then
          { [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ]; } && { [ "$rc" -eq 0 ] || one_line; } && ok=1
        else
          [ "$rc" -eq 2 ] && one_line && { has ": out of memory" || has "line longer than 64 MiB"; } && ok=1
        fi
        check "ulimit -v $kib, --threads $threads, $(basename "$input"): status $rc: $(head -c 200 "$tmp/stderr")" $ok
      done
    done
  done
fi
# Peak memory per input size: at most 40 MiB plus 4 bytes per byte of
# decoded trace, on the densest records measured (unique names, distinct
# allocations, python-tracer parameters: 1.8 to 2.7 bytes per byte).
python3 - "$tmp" <<'PY'
import sys
d, H, n = sys.argv[1], '{"format":"memtl-trace","version":1,"profile_memory":true}\n', 100000
end = '{"k":"alloc","i":%d,"p":-1,"t":5,"ptr":64,"bytes":16,"dev":"cpu"}\n'
with open(d + "/names.trace", "w") as f:
    f.write(H + "".join('{"k":"other","i":%d,"p":-1,"t0":%d,"name":"%d"}\n' % (i, i, i) for i in range(n)) + end % n)
with open(d + "/allocs.trace", "w") as f:
    f.write(H + "".join('{"k":"alloc","i":%d,"p":-1,"t":%d,"ptr":%d,"bytes":16,"dev":"cpu"}\n' % (i, i, 64 * i + 64)
                        for i in range(n)))
with open(d + "/params.trace", "w") as f:
    f.write(H)
    for i in range(50):
        ps = ",".join('{"t":{"ptr":%d}}' % (j % 7 + 1) for j in range(20000))
        f.write('{"k":"py","i":%d,"p":-1,"name":"o","t0":%d,"optimizer":{"self":%d,"params":[%s]}}\n' % (i, i, i, ps))
    f.write(end % 50)
PY
for name in names allocs params; do
  size=$(($(stat -c %s "$tmp/$name.trace") >> 20))
  measure export "$tmp/$name.trace" -o "$tmp/$name.json" -o "$tmp/$name.html"
  ok=0
  [ "$rc" -eq 0 ] && small $((40 + 4 * size)) && ok=1
  check "memory per input size, $name ($size MiB): status $rc, ${rss} MiB" $ok
done

# Live bytes past 2^63-1 (65,536 allocations of 2^47-1 bytes, then one
# more): an error naming the event, never a negative total.
python3 - "$tmp/sum.trace" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write('{"format":"memtl-trace","version":1,"ids":false,"profile_memory":true}\n')
    for i in range(65537):
        b = 65536 if i == 65536 else 2**47 - 1
        f.write('{"k":"alloc","i":%d,"p":-1,"t":%d,"tid":1,"ptr":%d,"bytes":%d,"dev":"cpu",'
                '"total_allocated":0,"total_reserved":0,"id":null,"aid":null}\n' % (i, 1000 * (i + 1), 4096 * (i + 1), b))
PY
measure export "$tmp/sum.trace" -o "$tmp/sum.json"
ok=0
[ "$rc" -eq 2 ] && one_line && has 'pass 2^63-1 at "[memory]" (event 65536' && [ ! -e "$tmp/sum.json" ] && ok=1
check "live bytes past 2^63-1: status $rc: $(head -c 200 "$tmp/stderr")" $ok

# A Kineto trace on one line (tensorboard_trace_handler, json.dump without
# indent) longer than the line limit: the same timeline as the same events
# pretty-printed, in about the same memory (the reader holds one event, not
# the line); and an event longer than 64 MiB is refused at the limit.
python3 - "$tmp" <<'PY'
import gzip, json, sys
d = sys.argv[1]
events, pad = [], "x" * 1400
for i in range(40000):
    ts = 10 * i
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::op%d" % (i % 50), "pid": 1, "tid": 1,
                   "ts": ts, "dur": 8, "args": {"Record function id": i, "Concrete Inputs": [pad]}})
    for k, b in ((1, 4096), (5, -4096)):
        events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
                       "ts": ts + k, "args": {"Addr": 65536 + 4096 * (i % 3), "Bytes": b,
                                              "Total Allocated": 4096 if b > 0 else 0,
                                              "Device Type": 0, "Device Id": -1}})
doc = {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": 1000}
with gzip.open(d + "/one_line.json.gz", "wt", compresslevel=1) as f:
    json.dump(doc, f)
with gzip.open(d + "/pretty.json.gz", "wt", compresslevel=1) as f:
    json.dump(doc, f, indent=1)
with gzip.open(d + "/long_event.json.gz", "wb", compresslevel=1) as f:
    f.write(b'{"traceEvents": [' + json.dumps(events[1]).encode() + b', {"name": "')
    for _ in range(100):
        f.write(b"a" * (1 << 20))
    f.write(b'"}]}')
PY
bytes=$(python3 -c 'import gzip, sys; print(sum(len(b) for b in iter(lambda f=gzip.open(sys.argv[1]): f.read(1 << 20), b"")))' "$tmp/one_line.json.gz")
measure export "$tmp/pretty.json.gz" -o "$tmp/pretty.json"
pretty_rss=$rss
measure export "$tmp/one_line.json.gz" -o "$tmp/one_line.json"
ok=0
[ "$bytes" -gt $((64 << 20)) ] && [ "$rc" -eq 0 ] && cmp -s "$tmp/pretty.json" "$tmp/one_line.json" &&
  small $((pretty_rss + 16)) && ok=1
check "Kineto trace on one line ($((bytes >> 20)) MiB): status $rc, ${rss} MiB (pretty-printed: ${pretty_rss} MiB): $(head -c 200 "$tmp/stderr")" $ok
measure export "$tmp/long_event.json.gz" -o "$tmp/long_event.json"
ok=0
[ "$rc" -eq 2 ] && one_line && has 'long_event.json.gz: line 1: element 2 of "traceEvents" is longer than 64 MiB' &&
  small 120 && ok=1
check "a 100 MiB Kineto event: status $rc, ${rss} MiB: $(head -c 200 "$tmp/stderr")" $ok

# 200 MiB of whitespace between two Kineto events, in 200 KB of gzip: the
# reader drops whitespace as it passes, so memory is the events' (it held
# the whitespace whole: 1 GiB of spaces took 1 GiB).
python3 - "$tmp/spaces.json.gz" <<'PY'
import gzip, sys
ev = b'{"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":%d,"args":{"Addr":64,"Bytes":%d,"Total Allocated":%d,"Device Type":0,"Device Id":-1}}'
with gzip.open(sys.argv[1], "wb", compresslevel=6) as f:
    f.write(b'{"traceEvents":[' + ev % (5, 16, 16) + b",")
    for _ in range(200):
        f.write(b" " * (1 << 20))
    f.write(ev % (6, -16, 0) + b'],"baseTimeNanoseconds":1000}\n')
PY
measure export "$tmp/spaces.json.gz" -o "$tmp/spaces.json"
ok=0
[ "$rc" -eq 0 ] && [ -s "$tmp/spaces.json" ] && small 60 && ok=1
check "200 MiB of whitespace between Kineto events: status $rc, ${rss} MiB: $(head -c 200 "$tmp/stderr")" $ok

echo "bad inputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
