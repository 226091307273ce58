#!/usr/bin/env bash
# Builds memtl and runs every test under CTest: unit, golden, CLI, bad-input
# corpus, the Python tests under Debian's torch 1.13 (/usr/bin/python3) and
# under torch 2.13 (.venv, made by scripts/venv.sh) with PyTorch's own
# memory profiler as the oracle, and the report in a browser.
#   scripts/test.sh              Release build in build/
#   scripts/test.sh --all        also the binary wheel, built and installed into
#                                a fresh environment (tests label "wheel": a
#                                second full build; CI runs it)
#   scripts/test.sh --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "" | --all | --sanitize) ;;
  *) echo "usage: $0 [--all|--sanitize]" >&2; exit 2 ;;
esac
scripts/deps.sh test
venv_python=$(scripts/venv.sh)
if [ "${1:-}" = "--sanitize" ]; then
  # Without the precompiled header, so that g++ 12 checks project code
  # with the warnings the header makes it switch off (CMakeLists.txt).
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMTL_SANITIZE=ON -DMEMTL_PCH=OFF \
    -DMEMTL_TEST_PYTHON="$venv_python" >/dev/null
  cmake --build build-asan -j"$(nproc)"
  cd build-asan
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --output-on-failure --no-tests=error -j2
else
  scripts/build.sh -DMEMTL_TEST_PYTHON="$venv_python"
  cd build
  skip=(-LE wheel)
  [ "${1:-}" = "--all" ] && skip=()
  ctest --output-on-failure --no-tests=error -j2 "${skip[@]}"
fi
