#!/usr/bin/env bash
# Configures and builds memtl into build/ (Release), with profile-guided
# optimization (MEMTL_PGO in CMakeLists.txt): an instrumented memtl is built
# first and runs scripts/pgo_train.sh, then everything is compiled with the
# profiles those runs wrote. MEMTL_PGO=0 scripts/build.sh builds without
# (one pass, half the time). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
pgo=
if [ "${MEMTL_PGO:-1}" != 0 ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMEMTL_PGO=generate "$@" >/dev/null
  find build -name '*.gcda' -delete
  cmake --build build -j"$(nproc)" --target memtl
  scripts/pgo_train.sh build/cli/memtl
  pgo=use
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMEMTL_PGO=$pgo "$@" >/dev/null
cmake --build build -j"$(nproc)"
