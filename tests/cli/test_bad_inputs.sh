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
echo "bad inputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
