#!/usr/bin/env bash
# The main job on the embedded default trace: a resnet18 SGD training step
# recorded with Debian's torch (fixtures/resnet18_sgd_step.trace.jsonl.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
scripts/build.sh
trace=fixtures/resnet18_sgd_step.trace.jsonl.gz
echo "== memtl graph $trace (first 40 lines)"
build/cli/memtl graph "$trace" >build/demo.graph
head -n 40 build/demo.graph
echo "... $(wc -l <build/demo.graph) data-flow nodes in all (build/demo.graph)"
