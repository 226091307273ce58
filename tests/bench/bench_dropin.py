"""Measures the drop-in (issue: PyTorch 2.x for real): what a user waits for
when calling `memtl.export_memory_timeline(prof, path)` instead of
`prof.export_memory_timeline(path)`, on torch 2.x profiles of 10^5 and more
events.

    .venv/bin/python tests/bench/bench_dropin.py [--reps 3] [--steps N] [mlp_adam] [transformer_adam]
        [transformer_adamw]

CPU only, one intra-op thread. Each workload runs one warm-up step, then
--steps training steps inside torch.profiler.profile(record_shapes=True,
profile_memory=True, with_stack=True):

- mlp_adam: 8 Linear+ReLU blocks (64 wide) and a head, batch 16, cross
  entropy, Adam;
- transformer_adam: the 2-layer nn.TransformerEncoder Adam step of
  record_workloads.py;
- transformer_adamw: the same with AdamW, 40 steps (about 1.8 * 10^5
  events): the op-heavy profile of issue 36's 100x target.

Every repetition profiles afresh for each measurement (PyTorch caches its
analysis on the profile object, and a second walk of the same tree is
faster than the first), and times:

- `tree s`: PyTorch building the event tree, which it does in
  `_disable_profiler()` when the profiler stops (measured by wrapping it;
  it also finalizes the Kineto trace, so it is an upper bound);
- `walk s`: `memtl.save` of the profile to an uncompressed trace (the
  recorder's walk of that tree; `experimental_event_tree()` itself only
  hands over the stored roots);
- `analysis s`: `memtl export TRACE -o .json` on that trace;
- `drop-in s`: `memtl.export_memory_timeline(prof, .json)` end to end;
- `pytorch s`: `prof.export_memory_timeline(.json)` (PyTorch's own analysis,
  its tree build not counted, as it happened at the profiler's exit);
- `both s`: one `memtl export TRACE -o .json -o .raw.json.gz` on the saved
  trace;
- `pt both s`: PyTorch's two exports, `.json` then `.raw.json.gz`, on one
  fresh profile (the second reuses the analysis it caches).

It prints the best of --reps for each, and the ratios of the issues:
pytorch / drop-in (target at least 10), walk / tree (target at most 2) and
pt both / both (issue 36: at least 100).
It also checks that the two .json files are equal after parsing.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import record_workloads  # noqa: E402
# PyTorch's tree build is timed by wrapping _disable_profiler, as for the
# recorder's benchmark: record() returns the profile and that time.
from bench_recorder import record as profiled  # noqa: E402

import memtl  # noqa: E402  (installed, or the source tree's python/ on PYTHONPATH)

def mlp_adam():
    nn = torch.nn
    model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(8)], nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 64), torch.randint(0, 10, (16,))

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def transformer_adamw():
    return record_workloads.transformer_adam(torch.optim.AdamW)


WORKLOADS = {
    "mlp_adam": (mlp_adam, 50),
    "transformer_adam": (record_workloads.transformer_adam, 25),
    "transformer_adamw": (transformer_adamw, 40),
}


def count_events(prof):
    n, stack = 0, list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        n += 1
        stack.extend(stack.pop().children)
    return n


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(step, steps, out):
    """One repetition: a dict of seconds (each on a fresh profile)."""
    t = {}
    prof, t["tree"] = profiled(step, steps)
    trace = os.path.join(out, "run.trace.jsonl")
    t["walk"] = timed(lambda: memtl.save(prof, trace))
    t["events"] = count_events(prof)
    del prof
    binary = memtl.binary()
    t["analysis"] = timed(lambda: subprocess.run([binary, "export", trace, "-o", os.path.join(out, "a.json")],
                                                 check=True))
    # Both of PyTorch's exports from one command (the trace already saved).
    t["both"] = timed(lambda: subprocess.run([binary, "export", trace, "-o", os.path.join(out, "a.json"),
                                              "-o", os.path.join(out, "b.raw.json.gz")], check=True))
    prof, _ = profiled(step, steps)
    t["drop-in"] = timed(lambda: memtl.export_memory_timeline(prof, os.path.join(out, "memtl.json")))
    del prof
    prof, _ = profiled(step, steps)
    t["pytorch"] = timed(lambda: prof.export_memory_timeline(os.path.join(out, "pytorch.json")))
    # The same workload profiled twice need not give the same events (times
    # differ); compare the answers on one profile instead.
    memtl.export_memory_timeline(prof, os.path.join(out, "memtl_same.json"))
    with open(os.path.join(out, "pytorch.json")) as a, open(os.path.join(out, "memtl_same.json")) as b:
        t["equal"] = json.load(a) == json.load(b)
    del prof
    # PyTorch's two exports from one profile (the second reuses the
    # analysis it caches on the profile).
    prof, _ = profiled(step, steps)
    t["pytorch both"] = timed(lambda: (prof.export_memory_timeline(os.path.join(out, "pt_both.json")),
                                       prof.export_memory_timeline(os.path.join(out, "pt_both.raw.json.gz"))))
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3, help="repetitions; every time is the best of them")
    ap.add_argument("--steps", type=int, help="training steps per profile (default: per workload, ~10^5 events)")
    ap.add_argument("workloads", nargs="*", help="of: %s (default: all)" % ", ".join(WORKLOADS))
    args = ap.parse_args()
    for name in args.workloads:
        if name not in WORKLOADS:
            ap.error("unknown workload %r" % name)
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # export_memory_timeline is deprecated upstream
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print("torch %s, memtl %s (%s)" % (torch.__version__, memtl.__version__, memtl.binary()))
    cols = ("events", "tree", "walk", "analysis", "drop-in", "pytorch", "both", "pt both")
    print("%-18s %6s %8s %8s %8s %8s %8s %8s %8s %8s  %10s %9s %10s %s" % (
        ("workload", "steps") + cols + ("pt/drop-in", "walk/tree", "pt/both", "equal")))
    for name in args.workloads or list(WORKLOADS):
        make, default_steps = WORKLOADS[name]
        steps = args.steps or default_steps
        step = make()
        step()  # warm-up: optimizer state exists before profiling
        best, equal = {}, True
        with tempfile.TemporaryDirectory(prefix="memtl_bench_") as out:
            for _ in range(args.reps):
                t = measure(step, steps, out)
                equal &= t.pop("equal")
                for k, v in t.items():
                    best[k] = min(best.get(k, v), v)
        print("%-18s %6d %8d %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f  %10.1f %9.2f %10.1f %s" % (
            name, steps, best["events"], best["tree"], best["walk"], best["analysis"], best["drop-in"],
            best["pytorch"], best["both"], best["pytorch both"], best["pytorch"] / best["drop-in"],
            best["walk"] / best["tree"], best["pytorch both"] / best["both"], equal))
    return 0


if __name__ == "__main__":
    sys.exit(main())
