#!/usr/bin/env bash
# Makes the virtual environment the PyTorch 2.x tests run in: .venv (or
# $MEMTL_VENV), from `python3` on PATH, with torch==2.13.0 (the CPU wheel
# this machine keeps on disk: always pinned, since an unpinned torch is a
# multi-GB CUDA build), pytest and selenium (the HTML report's browser test,
# tests/python/test_report_browser.py; pinned: 4.52 needs a certifi newer
# than the package index here has) and Dask's distributed (memtl.analyze's
# test on a real LocalCluster, tests/python/test_analyze.py; pinned). Does
# nothing when they are there already.
# Prints the environment's python.
#   scripts/venv.sh
#   MEMTL_VENV=.venv-newest MEMTL_TORCH=2.14.1 MEMTL_TORCHVISION=0.29.1 scripts/venv.sh
# The second is the newest torch these machines hold (a CUDA build of about
# 5.5 GB with its libraries, which runs on the CPU), for CI's oracle run on
# it (scripts/test_newest_torch.sh); MEMTL_TORCHVISION adds torchvision.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${MEMTL_VENV:-$PWD/.venv}"
torch_version="${MEMTL_TORCH:-2.13.0}"
torchvision_version="${MEMTL_TORCHVISION:-}"
selenium_version=4.51.0
distributed_version=2026.8.0
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  python3 -m venv "$venv" >&2
fi
vision_check="True"
vision_pkg=()
if [ -n "$torchvision_version" ]; then
  vision_check="__import__('torchvision').__version__.split('+')[0] == '$torchvision_version'"
  vision_pkg=("torchvision==$torchvision_version")
fi
if ! "$py" -c "import torch, pytest, selenium, distributed, sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version' or selenium.__version__ != '$selenium_version' or distributed.__version__ != '$distributed_version' or not ($vision_check))" 2>/dev/null; then
  echo "installing torch==$torch_version ${vision_pkg[*]}, pytest, selenium==$selenium_version and distributed==$distributed_version into $venv" >&2
  "$py" -m pip install -q --disable-pip-version-check "torch==$torch_version" "${vision_pkg[@]}" pytest \
    "selenium==$selenium_version" "distributed==$distributed_version" >&2
fi
echo "$py"
