"""memtl fit checked against real runs (issue #33, item 3): a fit from
batches 2, 4 and 8 predicts the measured peak of batches 16 and 32 within
5%, for an MLP and a small transformer, and by sequence length for the
transformer. The runs are recorded here, on the CPU, with the torch in use.

MEMTL_BIN names the memtl binary (default build/cli/memtl)."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

torch = pytest.importorskip("torch")
import memtl  # noqa: E402

MEMTL = os.environ.get("MEMTL_BIN", os.path.join(ROOT, "build", "cli", "memtl"))


def mlp_step(batch, seq=None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(batch, 256)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()

    return step


def transformer_step(batch, seq=32):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(batch, seq, 64)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()

    return step


def record(make, path, batch, seq=None):
    step = make(batch) if seq is None else make(batch, seq)
    step()  # warm-up: the optimizer's state exists before the profile
    with torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True) as prof:
        step()
    memtl.save(prof, path)


def run(*args):
    r = subprocess.run([MEMTL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def measured_peak(path):
    return json.loads(run("peak", path, "--format", "json", "--top", "0"))["bytes"]


@pytest.mark.skipif(not os.path.exists(MEMTL), reason="memtl binary not built")
@pytest.mark.parametrize("make", [mlp_step, transformer_step], ids=["mlp", "transformer"])
def test_fit_by_batch_predicts_larger_batches(make):
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for b in (2, 4, 8, 16, 32):
            paths[b] = os.path.join(d, "b%d.trace.jsonl.gz" % b)
            record(make, paths[b], b)
        for at in (16, 32):
            fit = json.loads(run("fit", paths[2], paths[4], paths[8], "--at", str(at), "--format", "json"))
            cpu = [dev for dev in fit["devices"] if dev["device"] == "cpu"][0]
            assert fit["scales"] == [2, 4, 8]  # read from the inputs' shapes
            predicted, measured = cpu["predicted_peak_bytes"], measured_peak(paths[at])
            assert abs(predicted - measured) <= 0.05 * measured, (at, predicted, measured)


@pytest.mark.skipif(not os.path.exists(MEMTL), reason="memtl binary not built")
@pytest.mark.xfail(int(torch.__version__.split(".")[0]) < 2, strict=True,
                   reason="torch 1.13's attention backward grows with the square only past 64 "
                   "(autograd detail 0.33 MB at 64, 2.36 MB at 128): 16/32/64 cannot see it and "
                   "miss 128 by -13% (docs/planning.md)")
def test_fit_by_sequence_length():
    """Sequence lengths 16, 32 and 64 predict 128 (256, 4x past, is 5.0% over:
    docs/planning.md). (From 8 up the
    fit misses: at 8 the step's parameters, gradients and Adam state set
    every phase's peak, another regime than the activations' growth;
    docs/planning.md.)"""
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for s in (16, 32, 64, 128):
            paths[s] = os.path.join(d, "s%d.trace.jsonl.gz" % s)
            record(transformer_step, paths[s], 4, s)
        for at in (128,):
            fit = json.loads(run("fit", paths[16], paths[32], paths[64], "--by", "seq", "--at", str(at),
                                 "--format", "json"))
            assert fit["scales"] == [16, 32, 64]
            cpu = [dev for dev in fit["devices"] if dev["device"] == "cpu"][0]
            predicted, measured = cpu["predicted_peak_bytes"], measured_peak(paths[at])
            assert abs(predicted - measured) <= 0.05 * measured, (at, predicted, measured)
