#!/usr/bin/env bash
# Builds memtl and runs every test: unit, golden, CLI and Python (recorder)
# tests under CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
scripts/build.sh
cd build
ctest --output-on-failure -j2
