#!/usr/bin/env bash
# Installs memtl with pip into .venv (the memtl command and the Python
# package), then runs the main job on the demo's trace: three AdamW training
# steps of a small transformer language model, recorded with torch 2.13
# (docs/transformer_adamw_3steps.trace.jsonl.gz, made by
# scripts/record_demo.py; docs/report.png is its report).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
venv="${MEMTL_VENV:-$PWD/.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
echo "== pip install . (builds the memtl command from source: a few minutes on 2 cores)"
"$venv/bin/python" -m pip install -q --disable-pip-version-check .
memtl="$venv/bin/memtl"
"$memtl" --version
trace=docs/transformer_adamw_3steps.trace.jsonl.gz
mkdir -p out
"$memtl" export "$trace" -o out/transformer_memory.html -o out/transformer_memory.raw.json.gz -o out/transformer_memory.json
"$memtl" graph "$trace" >out/transformer.graph
"$memtl" categories "$trace" >out/transformer.categories
echo "== the timeline, first lines (out/transformer.categories):"
head -n 12 out/transformer.categories
echo "== the peak: who holds the memory then (memtl peak):"
"$memtl" peak "$trace" --top 5
echo "== wrote out/transformer_memory.html (report with plot), out/transformer_memory.raw.json.gz,"
echo "   out/transformer_memory.json, out/transformer.graph ($(wc -l <out/transformer.graph) data-flow nodes), out/transformer.categories"
echo "== activate the environment to use memtl from your own code: . $venv/bin/activate"
