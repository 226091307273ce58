"""Records, for workloads of cuda_oracle.py, the three files a user may have
of one run: memtl's trace (memtl.save), the Kineto trace
(prof.export_chrome_trace, with its `[memory]` events) and the execution
trace (torch.profiler.ExecutionTraceObserver), all gzipped, into --out.

    PYTHONPATH=python:tests/python:tests/gpu python tests/gpu/record_inputs.py --out DIR

They test the Kineto reader and the execution-trace join (issue 22) on real
GPU runs: `memtl summary DIR/NAME.kineto.json.gz` and the join's categories
against `memtl categories DIR/NAME.trace.jsonl.gz`.
"""

import argparse
import gzip
import os
import shutil
import sys

import torch
from torch.profiler import ExecutionTraceObserver

import cuda_oracle
import memtl


def gzip_file(path):
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)


def record(name, out):
    et_path = os.path.join(out, name + ".et.json")
    observer = ExecutionTraceObserver().register_callback(et_path)
    plain = cuda_oracle.profile

    def with_et():
        p = plain()
        p.execution_trace_observer = observer
        return p
    cuda_oracle.profile = with_et
    try:
        torch.manual_seed(0)
        prof = cuda_oracle.WORKLOADS[name]()
    finally:
        cuda_oracle.profile = plain
        observer.unregister_callback()
    kineto = os.path.join(out, name + ".kineto.json")
    prof.export_chrome_trace(kineto)
    memtl.save(prof, os.path.join(out, name + ".trace.jsonl.gz"))
    for path in (kineto, et_path):
        if os.path.exists(path):
            gzip_file(path)
    return [f for f in sorted(os.listdir(out)) if f.startswith(name + ".")]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="*")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or sorted(cuda_oracle.WORKLOADS):
        files = record(name, args.out)
        print(name, " ".join("%s (%d B)" % (f, os.path.getsize(os.path.join(args.out, f))) for f in files),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
