#!/usr/bin/env bash
# End-to-end checks of memtl on CUDA memory snapshots (fixtures/snapshot/,
# written by tests/python/make_snapshot_fixtures.py): summary, peak,
# explain and every export format, the late start said, several devices,
# expandable segments and an out-of-memory entry.
#   MEMTL=build/cli/memtl bash tests/cli/test_snapshot_cli.sh ROOT
set -u
root="$1"
bin="${MEMTL:?set MEMTL to the memtl binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
snap="$root/fixtures/snapshot"
pass=0
fail=0
ok() {  # ok NAME: counts a check that passed when the last command did
  if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1"; fi
}
has() {  # has NAME FILE TEXT: FILE contains TEXT
  grep -qF -- "$3" "$2"
  ok "$1" $?
}

"$bin" summary "$snap/train.pickle.gz" >"$tmp/s.txt" 2>"$tmp/err"
ok summary-status $?
[ ! -s "$tmp/err" ]
ok summary-no-notes $?
has summary-inferred "$tmp/s.txt" "categories inferred"
has summary-peak "$tmp/s.txt" "cuda:0: peak 616.0 KiB"
has summary-frag "$tmp/s.txt" "at the peak the allocator reserved 2.0 MiB, of which 1.4 MiB free inside its segments (fragmentation)"
has summary-param "$tmp/s.txt" "PARAMETER (inferred)           130.0 KiB"
has summary-state "$tmp/s.txt" "OPTIMIZER_STATE (inferred)     260.0 KiB"
has summary-grad "$tmp/s.txt" "GRADIENT (inferred)            130.0 KiB"
has summary-line "$tmp/s.txt" "/home/user/train.py:31 in main()"
has summary-module "$tmp/s.txt" "linear.forward"

"$bin" summary "$snap/train.pickle.gz" --format json >"$tmp/s.json" 2>/dev/null
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d["devices"][0]; assert d["inferred"] and v["reserved_at_peak"]==2097152 and v["max_reserved"]==2097152, v' "$tmp/s.json"
ok summary-json $?

"$bin" peak "$snap/train.pickle.gz" >"$tmp/p.txt" 2>/dev/null
ok peak-status $?
has peak-inferred "$tmp/p.txt" "(inferred)"
has peak-frag "$tmp/p.txt" "free inside its segments (fragmentation)"
# The largest allocation at the peak, explained by its rule.
a=$(grep -oE '\bA[0-9]+\b' "$tmp/p.txt" | head -1)
"$bin" explain "$snap/train.pickle.gz" "$a" >"$tmp/e.txt" 2>/dev/null
ok explain-status $?
has explain-rule "$tmp/e.txt" "decided by: inference rule"

"$bin" export "$snap/train.pickle.gz" -o "$tmp/x.html" -o "$tmp/x.json" -o "$tmp/x.raw.json.gz" 2>"$tmp/err"
ok export-status $?
[ -s "$tmp/x.html" ] && [ -s "$tmp/x.json" ] && [ -s "$tmp/x.raw.json.gz" ]
ok export-files $?
has export-html-inferred "$tmp/x.html" "inferred"
has export-html-reserved "$tmp/x.html" '"reserved":['
python3 - "$tmp/x.json" "$tmp/x.raw.json.gz" <<'PY'
import gzip, json, sys
times, sizes = json.load(open(sys.argv[1]))
raw = json.load(gzip.open(sys.argv[2]))
# per time: the device's total before it, then the 8 categories' sizes
assert len(times) > 10 and len(sizes) == len(times) and len(sizes[0]) == 9, len(sizes)
peak = max(sum(row[1:]) for row in sizes)
assert peak == 616 * 1024, peak
assert all(len(r) == 4 for r in raw)
PY
ok export-json-peak $?

"$bin" events "$snap/train.pickle.gz" >"$tmp/ev.txt" 2>/dev/null
ok events-status $?

# Memory from before the trace: said on stderr, one block, still exported.
"$bin" summary "$snap/truncated.pickle.gz" >"$tmp/t.txt" 2>"$tmp/err"
ok truncated-status $?
has truncated-note "$tmp/err" "note: snapshot whose trace starts after memory was allocated"
has truncated-before "$tmp/t.txt" "(before the profile)"

"$bin" summary "$snap/multi_device.pickle.gz" >"$tmp/m.txt" 2>/dev/null
ok multi-status $?
has multi-cuda0 "$tmp/m.txt" "cuda:0: peak 448.0 KiB"
has multi-cuda1 "$tmp/m.txt" "cuda:1: peak 576.0 KiB"
"$bin" peak "$snap/multi_device.pickle.gz" --device cuda:1 >"$tmp/m1.txt" 2>/dev/null
ok multi-device-flag $?

"$bin" export "$snap/expandable.pickle.gz" -o "$tmp/e.html" 2>"$tmp/err"
ok expandable-status $?
has expandable-oom "$tmp/err" "note: out-of-memory error in the snapshot's trace (1x, e.g. cuda:0"
"$bin" peak "$snap/expandable.pickle.gz" >"$tmp/ep.txt" 2>/dev/null
has expandable-reserved "$tmp/ep.txt" "the allocator reserved at most 5.0 MiB"

# From a pipe, and --et refused.
gzip -dc "$snap/train.pickle.gz" | "$bin" summary - >"$tmp/pipe.txt" 2>/dev/null
cmp -s "$tmp/pipe.txt" "$tmp/s.txt"
ok pipe-same $?
"$bin" summary "$snap/train.pickle.gz" --et "$snap/train.pickle.gz" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -qF -- "--et goes with a Kineto trace; this is a CUDA memory snapshot" "$tmp/err"
ok et-refused $?


# Fragmentation by what holds each segment: the free bytes of the
# segments alive at the peak add up to the reserved total less the peak,
# on every snapshot (an expandable segment's block spans its mapped ranges).
for f in "$snap"/*.pickle.gz; do
  n=$(basename "$f" .pickle.gz)
  for cmd in peak summary; do
    "$bin" $cmd "$f" --format json >"$tmp/frag.json" 2>/dev/null
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for v in ([d] if "bytes" in d else d["devices"]):
    free = v["segment_free"]
    peak = v.get("bytes", v.get("peak_bytes"))
    assert sum(free.values()) == v["reserved_at_peak"] - peak, (free, v["reserved_at_peak"], peak)
' "$tmp/frag.json"
    ok "segment-free-sums-$cmd-$n" $?
  done
done
"$bin" peak "$snap/expandable.pickle.gz" >"$tmp/e.txt" 2>/dev/null
has segment-free-line "$tmp/e.txt" "free inside segments, by what holds each most: "
has segment-free-bytes "$tmp/e.txt" " 1.0 MiB"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
