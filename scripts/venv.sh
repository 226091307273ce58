#!/usr/bin/env bash
# Makes the virtual environment the PyTorch 2.x tests run in: .venv (or
# $MEMTL_VENV), from `python3` on PATH, with torch==2.13.0 (the CPU wheel
# this machine keeps on disk: always pinned, since an unpinned torch is a
# multi-GB CUDA build) and pytest. Does nothing when they are there already.
# Prints the environment's python.
#   scripts/venv.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${MEMTL_VENV:-$PWD/.venv}"
torch_version=2.13.0
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  python3 -m venv "$venv" >&2
fi
if ! "$py" -c "import torch, pytest, sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  echo "installing torch==$torch_version and pytest into $venv" >&2
  "$py" -m pip install -q --disable-pip-version-check "torch==$torch_version" pytest >&2
fi
echo "$py"
