"""memtl whatif checked against real runs (issue #33, item 3): the run with
a change replayed from the trace of the run without it predicts the peak
measured when the change is really made, within 5%, for an MLP of blocks
and a small transformer. The runs are recorded here, on the CPU, with the
torch in use (tests/python/plan_runs.py): an optimizer switch both ways,
gradients set to none and kept, torch.utils.checkpoint on each block, and
ZeroRedundancyOptimizer at world size 2 and 4 (gloo on loopback).

MEMTL_BIN names the memtl binary (default build/cli/memtl)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
pytest.importorskip("torch")

MEMTL = os.environ.get("MEMTL_BIN", os.path.join(ROOT, "build", "cli", "memtl"))
RUNS = os.path.join(ROOT, "tests", "python", "plan_runs.py")
pytestmark = pytest.mark.skipif(not os.path.exists(MEMTL), reason="memtl binary not built")


def record(out, *args):
    subprocess.run([sys.executable, RUNS, *args, "--out", str(out)], check=True, timeout=600,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan_runs")
    record(out, "single")
    return out


def memtl(*args):
    r = subprocess.run([MEMTL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def measured(path):
    return json.loads(memtl("peak", str(path), "--format", "json", "--top", "0"))["bytes"]


def predicted(path, *flags):
    report = json.loads(memtl("whatif", str(path), *flags, "--format", "json"))
    device = report["devices"][0]
    assert device["device"] == "cpu"
    return device


# (trace of the run without the change, the change, trace of the run with it)
CHANGES = [
    ("adam", ["--optimizer", "sgd"], "sgd"),
    ("sgd", ["--optimizer", "adam"], "adam"),
    ("adam", ["--no-set-to-none"], "adam_keep_grads"),
    ("adam_keep_grads", ["--set-to-none"], "adam"),
    ("adam_b1024", ["--checkpoint", "Block_*"], "adam_b1024_checkpoint"),
    ("encoder_adam", ["--optimizer", "sgd"], "encoder_sgd"),
    ("encoder_sgd", ["--optimizer", "adam"], "encoder_adam"),
    ("encoder_adam", ["--no-set-to-none"], "encoder_adam_keep_grads"),
    ("encoder_adam_keep_grads", ["--set-to-none"], "encoder_adam"),
    ("encoder_adam", ["--checkpoint", "TransformerEncoderLayer_*"], "encoder_adam_checkpoint"),
]


@pytest.mark.parametrize("base,flags,real", CHANGES,
                         ids=["%s %s" % (b, " ".join(f)) for b, f, _ in CHANGES])
def test_whatif_predicts_the_real_run(runs, base, flags, real):
    trace = lambda name: runs / (name + ".trace.jsonl.gz")  # noqa: E731
    device = predicted(trace(base), *flags)
    want = measured(trace(real))
    assert device["peak_bytes"]["before"] == measured(trace(base))
    got = device["peak_bytes"]["after"]
    assert abs(got - want) <= 0.05 * want, (flags, got, want)


@pytest.mark.parametrize("world", [2, 4])
def test_zero_1_predicts_each_rank(tmp_path, world):
    """The DDP run with Adam, replayed with --shard optimizer=N, against the
    same DDP run with ZeroRedundancyOptimizer over Adam: rank by rank."""
    record(tmp_path, "zero", "--world", str(world))
    device = predicted(tmp_path / "ddp_adam.rank0.trace.jsonl.gz", "--shard", "optimizer=%d" % world)
    ranks = device["rank_peak_bytes"] or [device["peak_bytes"]["after"]] * world
    assert len(ranks) == world
    for r in range(world):
        want = measured(tmp_path / ("ddp_zero.rank%d.trace.jsonl.gz" % r))
        assert abs(ranks[r] - want) <= 0.05 * want, (r, ranks[r], want)
