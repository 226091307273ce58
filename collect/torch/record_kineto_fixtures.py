"""Records the Kineto fixtures under fixtures/kineto/ (CPU only, torch 2.x).

    .venv/bin/python collect/torch/record_kineto_fixtures.py              # into fixtures/kineto/
    .venv/bin/python collect/torch/record_kineto_fixtures.py --out DIR

Each fixture is what a user already has: the Chrome trace that
prof.export_chrome_trace() or tensorboard_trace_handler writes, recorded
with profile_memory=True (memtl reads its [memory] events), gzipped:

- e2e_adam.kineto.json.gz: the e2e_adam scenario of record_fixtures.py
  with record_shapes and with_stack (python_function events, nn.Module
  scopes), and PyTorch's own raw memory timeline of the same run,
  e2e_adam.raw.json.gz (export_memory_timeline), whose totals the tests
  compare with memtl's;
- e2e_fwd_bwd_sgd.kineto.json.gz: the e2e_fwd_bwd_sgd scenario with
  profile_memory only (no shapes, no stacks: no module scopes);
- mlp_steps.pt.trace.json.gz: four MLP training steps under a schedule
  (wait 1, warmup 1, active 2), written by tensorboard_trace_handler
  (its file name made deterministic).

Copies of small public traces from ../shared/data/peer-traces/ sit beside
them (fixtures/kineto/README.md says which).
"""

import argparse
import glob
import gzip
import os
import shutil
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_fixtures  # noqa: E402

SCENARIOS = {s.name: s for s in record_fixtures.SCENARIOS}


def gzip_to(src, dst):
    # mtime 0: the same trace gives the same bytes.
    with open(src, "rb") as fin, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as fout:
            shutil.copyfileobj(fin, fout)


def scenario_trace(name, out, raw=False, **settings):
    torch.manual_seed(0)
    inputs, step = SCENARIOS[name].setup()
    with torch.profiler.profile(profile_memory=True, **settings) as prof:
        outputs = step(**inputs)
        del outputs
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        gzip_to(path, os.path.join(out, name + ".kineto.json.gz"))
    if raw:
        prof.export_memory_timeline(os.path.join(out, name + ".raw.json.gz"), device="cpu")


def scheduled_steps(out):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(16, 32), torch.randn(16, 8)
    with tempfile.TemporaryDirectory() as tmp:
        handler = torch.profiler.tensorboard_trace_handler(tmp, worker_name="worker0",
                                                           use_gzip=True)
        schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
        with torch.profiler.profile(profile_memory=True, record_shapes=True, with_stack=True,
                                    schedule=schedule, on_trace_ready=handler) as prof:
            for _ in range(4):
                opt.zero_grad()
                F.mse_loss(model(x), y).backward()
                opt.step()
                prof.step()
        (written,) = glob.glob(os.path.join(tmp, "*.pt.trace.json.gz"))
        # Re-gzipped with mtime 0, under a name without the time stamp.
        with gzip.open(written, "rb") as fin, open(os.path.join(tmp, "t.json"), "wb") as fout:
            shutil.copyfileobj(fin, fout)
        gzip_to(os.path.join(tmp, "t.json"), os.path.join(out, "mlp_steps.pt.trace.json.gz"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "fixtures", "kineto"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    scenario_trace("e2e_adam", args.out, raw=True, record_shapes=True, with_stack=True)
    scenario_trace("e2e_fwd_bwd_sgd", args.out)
    scheduled_steps(args.out)
    for f in sorted(os.listdir(args.out)):
        print(f, os.path.getsize(os.path.join(args.out, f)))


if __name__ == "__main__":
    main()
