#!/usr/bin/env bash
# Installs memtl with pip into .venv (the memtl command and the Python
# package), then runs the main job on the embedded default trace: a resnet18
# SGD training step recorded with Debian's torch
# (fixtures/resnet18_sgd_step.trace.jsonl.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
venv="${MEMTL_VENV:-$PWD/.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
echo "== pip install . (builds the memtl command; about a minute the first time)"
"$venv/bin/python" -m pip install -q --disable-pip-version-check .
memtl="$venv/bin/memtl"
"$memtl" --version
trace=fixtures/resnet18_sgd_step.trace.jsonl.gz
mkdir -p out
"$memtl" export "$trace" -o out/resnet18_memory.html -o out/resnet18_memory.raw.json.gz -o out/resnet18_memory.json
"$memtl" graph "$trace" >out/resnet18.graph
"$memtl" categories "$trace" >out/resnet18.categories
echo "== the timeline, first lines (out/resnet18.categories):"
head -n 12 out/resnet18.categories
echo "== wrote out/resnet18_memory.html (report with plot), out/resnet18_memory.raw.json.gz,"
echo "   out/resnet18_memory.json, out/resnet18.graph ($(wc -l <out/resnet18.graph) data-flow nodes), out/resnet18.categories"
echo "== activate the environment to use memtl from your own code: . $venv/bin/activate"
