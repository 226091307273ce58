"""What each read of PyTorch's profiler bindings costs: the reads the
recorder (python/memtl/_recorder.py) makes per event, op, input list and
tensor, each timed alone over one profile of the transformer step.

    /usr/bin/python3 tests/bench/recorder_reads.py [--reps 20] [resnet18_sgd|transformer_adam]

Needs Debian's torch 1.13 (the reads are 1.13's `extra_fields` API). Prints
one Markdown row per read: milliseconds for all items (best of --reps) and
microseconds per item. docs/performance.md (Recorder) quotes it.
"""

import argparse
import gc
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_recorder  # noqa: E402  (records the workloads the same way)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("workload", nargs="?", default="transformer_adam", choices=sorted(bench_recorder.WORKLOADS))
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    prof = bench_recorder.record(bench_recorder.WORKLOADS[args.workload](), 1)[0]
    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        events.append(e)
        stack.extend(e.children)
    fields = [e.extra_fields for e in events]
    ops = [f for f in fields if type(f).__name__.endswith("TorchOp")]
    inputs = [f.inputs for f in ops]
    tensors = [m for i in inputs for m in i.tensor_metadata if m is not None]
    print("%s: %d events, %d ops, %d tensor inputs, best of %d\n"
          % (args.workload, len(events), len(ops), len(tensors), args.reps))
    print("| read | items | ms | us per item |")
    print("|---|---:|---:|---:|")

    def row(label, items, fn):
        best = float("inf")
        for _ in range(args.reps):
            gc.collect()  # no collection left pending from the previous read
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        print("| %s | %d | %.2f | %.2f |" % (label, len(items), best * 1e3, best * 1e6 / max(len(items), 1)))

    row("`e.extra_fields`", events, lambda: [e.extra_fields for e in events])
    row("`e.start_time_ns`, `e.end_time_ns`, `e.start_tid`", events,
        lambda: [(e.start_time_ns, e.end_time_ns, e.start_tid) for e in events])
    row("`e.children`", events, lambda: [e.children for e in events])
    row("`e.name`", events, lambda: [e.name for e in events])
    row("op `f.scope`", ops, lambda: [f.scope for f in ops])
    row("op `f.inputs`", ops, lambda: [f.inputs for f in ops])
    row("op `f.sequence_number`", ops, lambda: [f.sequence_number for f in ops])
    row("`inputs.tensor_metadata`", inputs, lambda: [i.tensor_metadata for i in inputs])
    row("`inputs.shapes`, `inputs.strides`", inputs, lambda: [(i.shapes, i.strides) for i in inputs])
    row("`inputs.dtypes`", inputs, lambda: [i.dtypes for i in inputs])
    row("`inputs.ivalues`", inputs, lambda: [i.ivalues for i in inputs])
    row("tensor `device`, `dtype`, `layout`, `impl_ptr`, `storage_data_ptr`", tensors,
        lambda: [(m.device, m.dtype, m.layout, m.impl_ptr, m.storage_data_ptr) for m in tensors])


if __name__ == "__main__":
    main()
