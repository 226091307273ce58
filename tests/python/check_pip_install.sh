#!/usr/bin/env bash
# `pip install SOURCE` into a fresh virtual environment gives the memtl
# command on the environment's PATH and an importable memtl package that
# finds it, from any working directory and with no PYTHONPATH.
#   check_pip_install.sh PYTHON SOURCE WORKDIR
set -euo pipefail
python="$1" source="$2" work="$3"
rm -rf "$work"
mkdir -p "$work"
"$python" -m venv "$work/venv"
unset PYTHONPATH MEMTL_BIN
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$source"
cd "$work"
version=$("$work/venv/bin/memtl" --version)
py_version=$("$work/venv/bin/python" -c "import memtl; print(memtl.__version__)")
[ "$version" = "memtl $py_version" ] || { echo "FAIL: memtl --version says '$version', the package $py_version"; exit 1; }
found=$("$work/venv/bin/python" -c "import memtl; print(memtl.binary())")
[ "$found" = "$work/venv/bin/memtl" ] || { echo "FAIL: memtl.binary() is $found"; exit 1; }
PATH="$work/venv/bin:$PATH" memtl export "$source/fixtures/e2e_adam.trace.jsonl.gz" -o "$work/adam.json"
"$work/venv/bin/python" - "$work/adam.json" <<'PY'
import json, sys
times, sizes = json.load(open(sys.argv[1]))
assert times and len(times) == len(sizes) and len(sizes[0]) == 9, "bad export"
PY
echo "1 passed, 0 failed: pip install gives memtl $py_version"
