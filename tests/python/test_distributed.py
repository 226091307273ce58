"""Multi-process training on the CPU (gloo on loopback), every rank checked
against PyTorch's own memory profiler: DDP (default, gradient_as_bucket_view,
static_graph), ZeroRedundancyOptimizer, FSDP2's fully_shard and a
torch.compile'd model inside DDP at world size 2, and the cheaper ones at
world size 4 (distributed_runs.py does the work, in processes of its own,
under a time limit). Each rank's answer must equal PyTorch's; where PyTorch
raises (DDP's static graph can free a gradient bucket unrecorded:
docs/categories.md, "Storages freed unseen"), memtl must give every output.

Needs torch >= 2.0 (the oracle) with torch.distributed; skipped elsewhere.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

if importlib.util.find_spec("pytest") is None:
    raise unittest.SkipTest("the distributed tests need pytest")
import pytest  # noqa: E402

import torch  # noqa: E402

if int(torch.__version__.split(".")[0]) < 2:
    raise unittest.SkipTest("the distributed tests need torch >= 2.0 (this is %s)" % torch.__version__)
if not torch.distributed.is_available():
    raise unittest.SkipTest("this torch has no torch.distributed")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import memtl  # noqa: E402

RUNS = os.path.join(HERE, "distributed_runs.py")
ALL = ["ddp_default", "ddp_bucket_view", "ddp_static_graph", "zero_adam", "fsdp2", "ddp_compiled"]


def _run(world, scenarios, timeout):
    with tempfile.TemporaryDirectory(prefix="memtl_dist_") as out:
        args = [sys.executable, RUNS, "--world", str(world), "--out", out]
        for s in scenarios:
            args += ["--scenario", s]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        assert r.returncode == 0, r.stdout[-3000:]
        outcomes = {}
        for rank in range(world):
            with open(os.path.join(out, "rank%d.json" % rank)) as f:
                outcomes[rank] = json.load(f)
            traces = [n for n in os.listdir(out) if n.endswith(".rank%d.trace.jsonl.gz" % rank)]
            assert len(traces) == len(scenarios), (rank, traces)
        # memtl.analyze (memtl ranks) on each scenario's traces: every rank
        # once, known from the trace's header, one run.
        for s in scenarios:
            report = memtl.analyze(os.path.join(out, s + ".rank*.trace.jsonl.gz"))
            rows = report["ranks"]
            assert [r["rank"] for r in rows] == list(range(world)), (s, rows)
            assert all(r["world_size"] == world and not r.get("error") for r in rows), (s, rows)
            assert len({r["run"] for r in rows}) == 1 and report["skew"] >= 1, (s, report)
        return outcomes


def _check(outcomes, scenarios):
    bad = []
    for rank, by_name in outcomes.items():
        for name in scenarios:
            o = by_name.get(name, "missing")
            if o != "equal" and not (o.startswith("torch raised: ") and o.endswith("; memtl answered")):
                bad.append("rank %d %s: %s" % (rank, name, o))
    if bad:
        pytest.fail("\n".join(bad), pytrace=False)


def test_world_2_every_scenario():
    _check(_run(2, ALL, timeout=400), ALL)


def test_world_4():
    chosen = ["ddp_default", "zero_adam", "fsdp2"]
    _check(_run(4, chosen, timeout=400), chosen)
