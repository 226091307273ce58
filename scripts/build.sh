#!/usr/bin/env bash
# Configures and builds memtl into build/ (Release), in one pass. Extra
# arguments go to cmake's configure step. MEMTL_PGO=1 builds with
# profile-guided optimization instead (a release option, about twice the
# build time: an instrumented memtl is built and runs scripts/pgo_train.sh,
# then everything is compiled with the profiles those runs wrote; CMake
# option MEMTL_PGO, docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
pgo=
if [ "${MEMTL_PGO:-0}" != 0 ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMEMTL_PGO=generate "$@" >/dev/null
  find build -name '*.gcda' -delete
  cmake --build build -j"$(nproc)" --target memtl
  scripts/pgo_train.sh build/cli/memtl
  pgo=use
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMEMTL_PGO=$pgo "$@" >/dev/null
cmake --build build -j"$(nproc)"
