"""Records the execution-trace fixtures under fixtures/et/ (CPU only, torch 2.x).

    .venv/bin/python collect/torch/record_et_fixtures.py              # into fixtures/et/
    .venv/bin/python collect/torch/record_et_fixtures.py --out DIR
    .venv/bin/python collect/torch/record_et_fixtures.py NAME...     # only these

Each scenario of record_fixtures.py named below is profiled once, with
record_shapes, profile_memory, with_stack and an ExecutionTraceObserver
attached to the same profile, and that one run is written three ways:

- NAME.kineto.json.gz: prof.export_chrome_trace() (the [memory] events, the
  cpu_ops with their "Record function id");
- NAME.et.json.gz: the execution trace (nodes with rf_id, tensor and storage
  ids, shapes, schemas);
- NAME.trace.jsonl.gz: memtl's own recorder (memtl.save).

memtl categorizes the Kineto trace joined to the execution trace
(`memtl export NAME.kineto.json.gz --et NAME.et.json.gz`) and its own
trace; tests/python/test_et_join.py compares the two.
"""

import argparse
import gzip
import os
import shutil
import sys
import tempfile

import torch
from torch.profiler import ExecutionTraceObserver

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import memtl  # noqa: E402
import record_fixtures  # noqa: E402

SCENARIOS = {s.name: s for s in record_fixtures.SCENARIOS}
NAMES = ["e2e_fwd_bwd_sgd", "e2e_adam", "e2e_inference", "optimizers_indexing"]


class _Scenario:
    def __init__(self, name, setup):
        self.name, self.setup = name, setup


def _optimizers_indexing():
    """Ops whose schemas PyTorch 1.13's table lacks or has in an older form
    (fused AdamW's _fused_adamw_, foreach Adam's _foreach_add_.Tensor on its
    step tensors, with an empty max_exp_avg_sqs list), a list of optional
    tensors (aten::index), string arguments (gelu's approximate, div's
    rounding_mode); one warm step first, so that the optimizers' state
    exists before the profile."""
    emb = torch.nn.Embedding(50, 16)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(approximate="tanh"))
    head = torch.nn.Linear(32, 8)
    fused = torch.optim.AdamW(list(emb.parameters()) + list(mlp.parameters()), fused=True)
    foreach = torch.optim.Adam(head.parameters(), foreach=True)
    idx = torch.randint(0, 50, (8, 4))

    def step():
        h = emb(idx)[torch.arange(8), idx[:, 0] % 4]
        out = head(mlp(h))
        (out.sum() + out.div(3, rounding_mode="floor").sum()).backward()
        fused.step()
        foreach.step()
        fused.zero_grad()
        foreach.zero_grad()

    step()
    return {}, step


# Scenarios of the execution-trace fixtures only.
SCENARIOS["optimizers_indexing"] = _Scenario("optimizers_indexing", _optimizers_indexing)


def gzip_to(src, dst):
    # mtime 0: the same file gives the same bytes.
    with open(src, "rb") as fin, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as fout:
            shutil.copyfileobj(fin, fout)


def profile_with_et(name, tmp, with_stack):
    """Runs scenario `name` once under the profiler with an execution trace
    observer; returns the profile and the paths of the execution trace and
    the Kineto trace, both written into `tmp`."""
    torch.manual_seed(0)
    inputs, step = SCENARIOS[name].setup()
    et_path = os.path.join(tmp, "et.json")
    et = ExecutionTraceObserver().register_callback(et_path)
    with torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=with_stack,
                                execution_trace_observer=et) as prof:
        outputs = step(**inputs)
        del outputs
    et.unregister_callback()
    kineto = os.path.join(tmp, "kineto.json")
    prof.export_chrome_trace(kineto)
    return prof, et_path, kineto


def record(name, out):
    with tempfile.TemporaryDirectory() as tmp:
        prof, et_path, kineto = profile_with_et(name, tmp, with_stack=True)
        gzip_to(kineto, os.path.join(out, name + ".kineto.json.gz"))
        gzip_to(et_path, os.path.join(out, name + ".et.json.gz"))
    memtl.save(prof, os.path.join(out, name + ".trace.jsonl.gz"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "fixtures", "et"))
    parser.add_argument("names", nargs="*", help="scenarios to record (default: all)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.names or NAMES:
        record(name, args.out)
        print(name)


if __name__ == "__main__":
    main()
