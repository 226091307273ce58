"""memtl on the inputs users already have: Kineto traces and PyTorch's raw
memory timelines (fixtures/kineto/, collect/torch/record_kineto_fixtures.py).

- On every Kineto fixture, the allocated total of memtl's .json export
  equals the trace's own "Total Allocated" after every [memory] event.
- On e2e_adam, recorded together with PyTorch's own raw timeline of the same
  run, memtl's total differs from PyTorch's by one constant: the memory
  PyTorch's profiler knows from before the profile (tensors it saw as op
  inputs), which the allocator's events never mention, less the memory the
  allocator held before the profile, which memtl shows as unknown and
  PyTorch leaves out.
- With torch >= 2.0, a fresh recording checks the same against PyTorch's
  export_memory_timeline.
- A raw timeline exported again as .json gives PyTorch's own coalescing of
  its rows.

    PYTHONPATH=python MEMTL_BIN=build/cli/memtl python -m pytest tests/python/test_kineto.py -q
"""

import bisect
import gzip
import json
import os
import subprocess
import tempfile
from decimal import Decimal

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KINETO = os.path.join(ROOT, "fixtures", "kineto")
PEER = os.path.join(ROOT, "..", "shared", "data", "peer-traces")
TRACES = ["e2e_adam.kineto.json.gz", "e2e_fwd_bwd_sgd.kineto.json.gz",
          "mlp_steps.pt.trace.json.gz", "kineto-h100-bert-small-inference.json.gz"]


def memtl_bin():
    if os.environ.get("MEMTL_BIN"):
        return os.environ["MEMTL_BIN"]
    import memtl
    return memtl.binary()


def run(*args):
    return subprocess.run([memtl_bin(), *args], capture_output=True, text=True)


def export_totals(path, device=None):
    """memtl's .json export of `path`: {time_us: total of all categories}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.json")
        args = ["export", path, "-o", out] + (["--device", device] if device else [])
        r = run(*args)
        assert r.returncode == 0, r.stderr
        with open(out) as f:
            times, sizes = json.load(f)
    return {t: sum(s) for t, s in zip(times, sizes)}, r.stderr


def load_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        # Decimal: "ts" has nanoseconds after the point, exactly.
        return json.load(f, parse_float=Decimal)


def device_of(args):
    return "cpu" if args.get("Device Type", 0) == 0 else "cuda:%d" % args.get("Device Id", 0)


def trace_totals(path):
    """Per device, the trace's "Total Allocated" after the last [memory] event
    of each microsecond, as memtl's rows are (PyTorch's int(t_ns / 1000))."""
    d = load_json(path)
    base = d.get("baseTimeNanoseconds", 0) if isinstance(d, dict) else 0
    events = d["traceEvents"] if isinstance(d, dict) else d
    mem = [e for e in events if e.get("name") == "[memory]"]
    mem.sort(key=lambda e: e["ts"])  # stable: file order within a time
    out = {}
    for e in mem:
        if "Total Allocated" not in e["args"]:
            continue
        ns = base + int(e["ts"] * 1000)
        out.setdefault(device_of(e["args"]), {})[int(ns / 1000)] = e["args"]["Total Allocated"]
    return out


@pytest.mark.parametrize("name", TRACES)
def test_allocated_total_is_the_trace_total(name):
    path = os.path.join(KINETO, name)
    for device, want in trace_totals(path).items():
        got, stderr = export_totals(path, device)
        assert "differs from the trace" not in stderr
        bad = [(t, v, got.get(t)) for t, v in want.items() if got.get(t) != v]
        assert not bad, "%s on %s: %d of %d times differ, e.g. %s" % (name, device, len(bad),
                                                                     len(want), bad[:3])


def pytorch_totals(raw_rows):
    """PyTorch's raw timeline as a step function: sorted times (us) and the
    total after each; pre-existing memory (time -1) apart."""
    pre, total, steps = 0, 0, {}
    for t, _action, nbytes, _cat in raw_rows:
        total += nbytes
        if t == -1:
            pre += nbytes
        else:
            steps[int(t / 1000)] = total
    times = sorted(steps)
    return pre, times, [steps[t] for t in times]


def allocator_before(path, device):
    """What the allocator held on `device` before the trace's first [memory]
    event: its Total Allocated less its Bytes. memtl shows it as unknown from
    the first event; PyTorch's timeline, knowing no tensor of it, leaves it
    out. Zero in a fresh process; a process that profiled before may still
    hold memory allocated under that profile (the CPU allocator counts only
    what it saw while a profiler was on)."""
    d = load_json(path)
    events = d["traceEvents"] if isinstance(d, dict) else d
    mem = sorted((e for e in events if e.get("name") == "[memory]"
                  and device_of(e["args"]) == device and "Total Allocated" in e["args"]),
                 key=lambda e: e["ts"])
    return mem[0]["args"]["Total Allocated"] - mem[0]["args"]["Bytes"] if mem else 0


def assert_constant_offset(memtl_rows, raw_rows, before=0):
    pre, times, totals = pytorch_totals(raw_rows)
    mt = sorted(memtl_rows)
    offsets = set()
    for t, v in zip(times, totals):
        i = bisect.bisect_right(mt, t) - 1
        if i >= 0:
            offsets.add(v - memtl_rows[mt[i]])
    # One constant: what PyTorch knew from before the profile (tensors it saw
    # as op inputs) less what the allocator held before it (`before`).
    assert offsets == {pre - before}, offsets


def test_total_against_pytorchs_own_timeline():
    path = os.path.join(KINETO, "e2e_adam.kineto.json.gz")
    got, _ = export_totals(path)
    assert_constant_offset(got, load_json(os.path.join(KINETO, "e2e_adam.raw.json.gz")),
                           allocator_before(path, "cpu"))


def test_fresh_recording_against_pytorch():
    torch = pytest.importorskip("torch")
    if int(torch.__version__.split(".")[0]) < 2:
        pytest.skip("needs torch >= 2.0 (export_memory_timeline)")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(16, 32)
    with torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True) as prof:
        for _ in range(2):
            opt.zero_grad()
            model(x).square().sum().backward()
            opt.step()
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        raw = os.path.join(tmp, "t.raw.json.gz")
        prof.export_chrome_trace(trace)
        prof.export_memory_timeline(raw, device="cpu")
        for device, want in trace_totals(trace).items():
            got, _ = export_totals(trace, device)
            assert all(got.get(t) == v for t, v in want.items())
        got, _ = export_totals(trace, "cpu")
        assert_constant_offset(got, load_json(raw), allocator_before(trace, "cpu"))


@pytest.mark.parametrize("name", ["e2e_adam.raw.json.gz", "pytorch-export-memory-timeline.raw.json.gz"])
def test_raw_timeline_exports_pytorchs_coalescing(name):
    path = os.path.join(KINETO, name)
    rows = load_json(path)
    got, _ = export_totals(path)
    # PyTorch's _coalesce_timeline: pre-existing rows at the smallest time.
    first = min(int(t / 1000) for t, *_ in rows if t != -1)
    want, total = {}, 0
    for t, _a, nbytes, _c in rows:
        total += nbytes
        want[first if t == -1 else int(t / 1000)] = total
    assert got == want


def test_resnet50_2021_without_addresses():
    path = os.path.join(PEER, "kineto-2021-resnet50-train.json.gz")
    if not os.path.exists(path):
        pytest.skip("the 2021 trace is not in ../shared/data/peer-traces")
    r = run("peak", path, "--device", "cuda:0")
    assert r.returncode == 0, r.stderr
    assert "peak of cuda:0" in r.stdout
    assert "paired with an allocation by its size" in r.stderr


@pytest.mark.parametrize("name,message", [
    ("execution-trace-simple-add.et.json.gz", "this is a PyTorch execution trace"),
    ("execution-trace-simple-add.kineto.json.gz", "no [memory] events (profile_memory was off)"),
])
def test_inputs_memtl_cannot_use_say_why(name, message):
    r = run("export", os.path.join(KINETO, name), "-o", os.path.join(tempfile.gettempdir(), "x.json"))
    assert r.returncode == 2
    assert message in r.stderr and r.stderr.count("\n") == 1
