#!/usr/bin/env bash
# The oracle tests on the newest torch these machines hold (torch 2.14.1
# with torchvision 0.29.1, a CUDA build that runs on the CPU): every
# workload and fixture scenario of test_oracle.py (with torchvision, the
# resnet18 and MobileNetV3 workloads too), the distributed runs of
# test_distributed.py and the recorder's tests, against this build's memtl.
# CI runs it after scripts/test.sh (.ci/run); it is not part of the README's
# test command, whose time it would double. The environment is
# .venv-newest (scripts/venv.sh with MEMTL_TORCH and MEMTL_TORCHVISION).
#   scripts/test_newest_torch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(MEMTL_VENV="$PWD/.venv-newest" MEMTL_TORCH=2.14.1 MEMTL_TORCHVISION=0.29.1 scripts/venv.sh)
[ -x build/cli/memtl ] || scripts/build.sh
env PYTHONPATH=python MEMTL_BIN=build/cli/memtl MEMTL_TORCH_NATIVE=0 PYTHONDONTWRITEBYTECODE=1 \
  "$py" -m pytest -q -p no:cacheprovider tests/python/test_oracle.py tests/python/test_distributed.py \
  tests/python/test_recorder.py tests/python/test_export_api.py tests/python/test_analyze.py
