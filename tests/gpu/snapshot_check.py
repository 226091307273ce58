"""CUDA memory snapshots on a GPU (docs/trace-format.md, "CUDA memory
snapshots"): three workloads of cuda_oracle.py run with
torch.cuda.memory._record_memory_history instead of the profiler, their
snapshots dumped with _dump_snapshot, and memtl's peak of each snapshot
checked against the allocator's own counter over the same window
(torch.cuda.max_memory_allocated after reset_peak_memory_stats): the
allocated curve memtl rebuilds from the snapshot's entries and segments must
reach exactly the allocator's peak. The reserved total memtl gives at the
peak must lie between that peak and max_memory_reserved. The snapshots stay
in --out, gzipped, as fixtures.

    MEMTL_BIN=build/cli/memtl PYTHONPATH=python:tests/python:tests/gpu \\
        python tests/gpu/snapshot_check.py --out DIR
"""

import argparse
import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys

import torch

import cuda_oracle

WORKLOADS = ["mlp_sgd_momentum", "mlp_adam_foreach", "convnet_bn_sgd"]


class Recording:
    """Stands in for the profiler around a workload's measured steps."""

    def __init__(self, path):
        self.path = path
        self.peak = 0

    def __enter__(self):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(max_entries=200000)
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        self.peak = torch.cuda.max_memory_allocated()
        self.reserved = torch.cuda.max_memory_reserved()
        torch.cuda.memory._dump_snapshot(self.path)
        torch.cuda.memory._record_memory_history(enabled=None)
        return False


def check(name, out, memtl_bin):
    path = os.path.join(out, name + ".pickle")
    rec = Recording(path)
    plain = cuda_oracle.profile
    cuda_oracle.profile = lambda: rec
    try:
        torch.manual_seed(0)
        cuda_oracle.WORKLOADS[name]()
    finally:
        cuda_oracle.profile = plain
    with open(path, "rb") as f:
        entries = sum(len(t) for t in pickle.load(f)["device_traces"])
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)
    run = subprocess.run([memtl_bin, "summary", path + ".gz", "--format", "json"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{name}: memtl summary failed: {run.stderr.strip()}")
        return False
    dev = next(d for d in json.loads(run.stdout)["devices"] if d["device"] == "cuda:0")
    html = subprocess.run([memtl_bin, "export", path + ".gz", "-o", os.path.join(out, name + ".html")],
                          capture_output=True, text=True)
    reserved = dev.get("reserved_at_peak", 0)
    ok = (dev["peak_bytes"] == rec.peak and html.returncode == 0
          and rec.peak <= reserved <= rec.reserved)
    print(f"{name}: {entries} entries; memtl peak {dev['peak_bytes']}, allocator's {rec.peak}; "
          f"reserved at the peak {reserved} (allocator's max {rec.reserved}); "
          f"report {'written' if html.returncode == 0 else 'FAILED: ' + html.stderr.strip()}  "
          f"{'ok' if ok else 'FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("snapshot check: no CUDA device")
        return 1
    os.makedirs(args.out, exist_ok=True)
    memtl_bin = os.environ.get("MEMTL_BIN", "memtl")
    results = [check(name, args.out, memtl_bin) for name in WORKLOADS]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
