#!/usr/bin/env bash
# The binary wheel (scripts/wheel.sh) installs into a fresh virtual
# environment whose PATH holds no compiler, CMake or pkg-config, and there:
# - `memtl --version` runs and agrees with the package;
# - memtl.binary() finds the installed command from any working directory,
#   with no PYTHONPATH;
# - the command needs no system library but the C and C++ runtimes: every
#   other library it loads is one the wheel carries;
# - the README's Python example runs as written (torch comes from
#   TORCH_PYTHON's environment, which the fresh one sees after its own).
#   check_wheel.sh TORCH_PYTHON SOURCE WORKDIR
set -euo pipefail
torch_python="$1" source="$2" work="$3"
rm -rf "$work"
mkdir -p "$work"
unset PYTHONPATH MEMTL_BIN
fail() {
  echo "FAIL: $*"
  exit 1
}

bash "$source/scripts/wheel.sh" "$work/dist"
wheels=("$work"/dist/memtl-*-py3-none-manylinux_*_x86_64.whl)
[ "${#wheels[@]}" -eq 1 ] && [ -f "${wheels[0]}" ] || fail "scripts/wheel.sh made ${wheels[*]}"
# glibc 2.35 (Ubuntu 22.04) at most (cli/glibc_arc4random.cpp).
glibc_minor=$(sed -n 's/.*-manylinux_2_\([0-9]*\)_x86_64\.whl$/\1/p' <<<"${wheels[0]}")
[ "${glibc_minor:-99}" -le 35 ] || fail "the wheel needs glibc 2.$glibc_minor: ${wheels[0]}"

python3 -m venv "$work/venv"
venv="$work/venv"
# On PATH only the environment's own folder and a few file tools: no cc,
# c++, cmake or pkg-config.
mkdir "$work/tools"
for tool in awk basename cat dirname grep mkdir rm sed; do ln -s "$(command -v "$tool")" "$work/tools/$tool"; done
export PATH="$venv/bin:$work/tools"
for tool in cc gcc c++ g++ cmake pkg-config make; do
  if command -v "$tool" >/dev/null; then fail "$tool is on the test's PATH"; fi
done
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-index "${wheels[0]}"
# On another platform pip refuses the wheel at install, with its own message.
if "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-index --dry-run \
  --target "$work/other" --platform macosx_11_0_arm64 --only-binary=:all: "${wheels[0]}" \
  >"$work/other.log" 2>&1; then
  fail "pip installs the wheel for macosx_11_0_arm64"
fi
grep -q "is not a supported wheel on this platform" "$work/other.log" || fail "$(cat "$work/other.log")"
cd "$work"

version=$(memtl --version)
py_version=$("$venv/bin/python" -c "import memtl; print(memtl.__version__)")
[ "$version" = "memtl $py_version" ] || fail "memtl --version says '$version', the package $py_version"
binary=$("$venv/bin/python" -c "import memtl; print(memtl.binary())")
case "$binary" in
  "$venv"/lib/python3*/site-packages/memtl.scripts/memtl) ;;
  *) fail "memtl.binary() is $binary, not the wheel's command" ;;
esac
[ "$("$binary" --version)" = "$version" ] || fail "$binary --version"

# ldd's libraries: the wheel's own (memtl.libs/) or the C and C++ runtimes.
/usr/bin/ldd "$binary" >"$work/ldd.txt"
while read -r name _ path _; do
  case "$name" in
    linux-vdso.so.* | /lib64/ld-linux-x86-64.so.* | libc.so.* | libm.so.* | libstdc++.so.* | libgcc_s.so.*) ;;
    *)
      case "$path" in
        "$venv"/lib/python3*/site-packages/memtl.libs/* | \
          "$venv"/lib/python3*/site-packages/memtl.scripts/../memtl.libs/*) ;;
        *) fail "the command loads $name from ${path:-nowhere}, which the wheel does not carry" ;;
      esac
      ;;
  esac
done <"$work/ldd.txt"

memtl export "$source/fixtures/e2e_adam.trace.jsonl.gz" -o "$work/adam.json"
"$venv/bin/python" - "$work/adam.json" <<'PY'
import json, sys
times, sizes = json.load(open(sys.argv[1]))
assert times and len(times) == len(sizes) and len(sizes[0]) == 9, "bad export"
PY

# The README's first Python example, as written, with torch from
# TORCH_PYTHON's environment (appended to sys.path, after the wheel's memtl).
torch_dir=$("$torch_python" -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
echo "$torch_dir" >"$site/zz_torch.pth"
awk '/^```python$/ { on = 1; next } on && /^```$/ { exit } on' "$source/README.md" >"$work/readme_example.py"
[ -s "$work/readme_example.py" ] || fail "no Python example in README.md"
mkdir "$work/example"
(cd "$work/example" && "$venv/bin/python" "$work/readme_example.py") || fail "the README's Python example"
found=$("$venv/bin/python" -c "import memtl, os; print(os.path.dirname(memtl.__file__))")
[ "$found" = "$site/memtl" ] || fail "the example imported memtl from $found"
echo "1 passed, 0 failed: the wheel $(basename "${wheels[0]}") installs and runs without a compiler"
