#!/usr/bin/env bash
# The main job on the embedded default trace: a resnet18 SGD training step
# recorded with Debian's torch (fixtures/resnet18_sgd_step.trace.jsonl.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
scripts/build.sh
trace=fixtures/resnet18_sgd_step.trace.jsonl.gz
mkdir -p out
build/cli/memtl export "$trace" -o out/resnet18_memory.html
build/cli/memtl export "$trace" -o out/resnet18_memory.raw.json.gz
build/cli/memtl export "$trace" -o out/resnet18_memory.json
build/cli/memtl graph "$trace" >out/resnet18.graph
build/cli/memtl categories "$trace" >out/resnet18.categories
echo "== the timeline, first lines (out/resnet18.categories):"
head -n 12 out/resnet18.categories
echo "== wrote out/resnet18_memory.html (report with plot), out/resnet18_memory.raw.json.gz,"
echo "   out/resnet18_memory.json, out/resnet18.graph ($(wc -l <out/resnet18.graph) data-flow nodes), out/resnet18.categories"
