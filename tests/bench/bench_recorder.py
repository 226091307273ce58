"""Measures the recorder's target (issue #4): `recorder.save` adds at most
2x the time PyTorch takes to build the event tree, and never holds the whole
serialized trace in memory.

    /usr/bin/python3 tests/bench/bench_recorder.py [--reps 5] [--steps 1] [--out DIR]
        [--cprofile] [--compare OLD/recorder.py] [resnet18_sgd] [transformer_adam]
        [compile_in_profile]

Needs torch (Debian's, via /usr/bin/python3); CPU only, one intra-op thread.
Workloads (one warm-up step outside the profiler, then --steps steps inside
torch.profiler.profile(record_shapes=True, profile_memory=True,
with_stack=True)):

- resnet18_sgd: torchvision resnet18 (10 classes) at 4x3x64x64, SGD momentum;
- transformer_adam: the 2-layer nn.TransformerEncoder Adam step of
  record_workloads.py;
- compile_in_profile (torch 2.x, `.venv/bin/python`): an MLP SGD step whose
  model torch.compile compiles inside the profile.

Each repetition records a fresh profile and times, on it:

- `tree s`: PyTorch building the tree. PyTorch (1.13 and 2.x alike) builds the
  event tree inside `_disable_profiler()`, when the profiler stops, and keeps
  it in the result object; `experimental_event_tree()` only hands the stored
  roots to Python (microseconds, and the same objects on every call). So the
  tree's build time is the wall time of `_disable_profiler()`, measured by
  wrapping it. That call also finalizes the Kineto trace, so it is an upper
  bound on the tree build alone; `call s` and `walk s` give the other ends.
- `call s`: the first `experimental_event_tree()` call on the fresh result.
- `walk s`: a bare Python depth-first walk of the tree (reading `.children`
  of every event): the least any Python consumer of the tree pays.
- `save s`: `recorder.save(prof, DIR/NAME.trace.jsonl.gz)` end to end.
  Its own `experimental_event_tree()` call is timed through a proxy and
  subtracted: `save-minus-tree s`. (It is microseconds: the tree is not
  built twice.) It uses the native walk when it loads (collect/torch/native,
  built by CMake into build/collect/torch); `walk` says which ran.
- `python save s`: the same save with the Python walk forced, on the same
  profile, when the native walk is in use (so both are measured in one run);
  `python ratio` is its save-minus-tree over the tree time.

Every time is the best of --reps repetitions. Then one more save runs under
tracemalloc: its peak of Python allocations during save (the event tree
itself is PyTorch's C++ memory, allocated before save starts; what save
adds is one pybind wrapper per event on the walk stack, the records joined
per write -- at most recorder._FLUSH_LINES -- and their UTF-8 encoding)
against the size of the uncompressed trace it wrote (zlib's ~260 KB of
deflate state is among the traced allocations). The same save is also
measured with the kernel's peak-RSS counter reset just before it (Linux
/proc/self/clear_refs): the growth of RSS above what the process already had,
which is ~0 when save's memory fits in what profiling freed.

--cprofile prints the top functions of one extra save per workload.
--compare OLD saves the last profile of each workload with the recorder
module at path OLD too (e.g. `git show REV:python/memtl/_recorder.py >
/tmp/old.py`) and says whether the files, and their decompressed bytes, are
identical: the check that an optimization did not change the output.
"""

import argparse
import cProfile
import functools
import gzip
import importlib.util
import io
import os
import pstats
import sys
import tempfile
import time
import tracemalloc

import torch
import torch.autograd.profiler as autograd_profiler

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the source tree's package
sys.path.insert(0, HERE)
from memtl import _recorder as recorder  # noqa: E402
import record_workloads  # noqa: E402


def resnet18_sgd():
    return record_workloads.resnet18_sgd(image_size=64)


def compile_in_profile():
    """An MLP SGD step whose model torch.compile compiles inside the profile
    (torch 2.x; the compile's python calls dominate the trace): each step
    resets dynamo, so every profiled step compiles again (inductor's caches
    on disk make the repetitions alike)."""
    import torch._dynamo

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(32, 64)

    def step():
        torch._dynamo.reset()
        compiled = torch.compile(model)
        opt.zero_grad(set_to_none=True)
        compiled(x).sum().backward()
        opt.step()

    return step


WORKLOADS = {"resnet18_sgd": resnet18_sgd, "transformer_adam": record_workloads.transformer_adam,
             "compile_in_profile": compile_in_profile}


# ---- timing PyTorch's tree build -------------------------------------------------

_disable_times = []
_real_disable = autograd_profiler._disable_profiler


def _timed_disable():
    start = time.perf_counter()
    result = _real_disable()
    _disable_times.append(time.perf_counter() - start)
    return result


# torch.autograd.profiler.profile.__exit__ calls the module-level name.
autograd_profiler._disable_profiler = _timed_disable


class _TimedResults:
    """Stands in for the profiler's result object during save, timing save's
    own experimental_event_tree() call."""

    def __init__(self, results):
        self.results = results
        self.seconds = 0.0

    def experimental_event_tree(self):
        start = time.perf_counter()
        roots = self.results.experimental_event_tree()
        self.seconds += time.perf_counter() - start
        return roots


def record(step, steps):
    del _disable_times[:]
    with torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True) as prof:
        for _ in range(steps):
            step()
    assert len(_disable_times) == 1, _disable_times
    return prof, _disable_times[0]


def walk(roots):
    n = 0
    stack = list(roots)
    pop, extend = stack.pop, stack.extend
    while stack:
        n += 1
        extend(pop().children)
    return n


def timed_save(prof, path):
    """(seconds of save, seconds of save's own experimental_event_tree call)."""
    profiler = prof.profiler
    results = profiler.kineto_results
    proxy = _TimedResults(results)
    profiler.kineto_results = proxy
    try:
        start = time.perf_counter()
        recorder.save(prof, path)
        total = time.perf_counter() - start
    finally:
        profiler.kineto_results = results
    return total, proxy.seconds


def timed_python_save(prof, path):
    """timed_save with memtl_torch's Python walk forced."""
    saved = recorder._native
    recorder._native = False
    try:
        return timed_save(prof, path)
    finally:
        recorder._native = saved


def trace_stats(path):
    """(events, uncompressed bytes) of a written trace."""
    events = size = 0
    with gzip.open(path, "rb") as f:
        for k, line in enumerate(f):
            size += len(line)
            if k and not line.startswith(b'{"k":"schema"'):
                events += 1
    return events, size


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def rss_growth_during(fn):
    """Peak RSS during fn() minus RSS before it, in bytes (None when the
    kernel's peak counter cannot be reset)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        fn()
        return None
    before = _status_kib("VmRSS")
    fn()
    return (_status_kib("VmHWM") - before) * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="repetitions; every time is the best of them")
    ap.add_argument("--steps", type=int, default=1, help="training steps per profile")
    ap.add_argument("--out", help="where the traces go (default: a temporary directory)")
    ap.add_argument("--cprofile", action="store_true", help="print a cProfile of one more save per workload")
    ap.add_argument("--compare", metavar="OLD", help="another recorder.py whose output must be identical")
    ap.add_argument("workloads", nargs="*", help="%s (default: all)" % ", ".join(WORKLOADS))
    args = ap.parse_args()
    if args.reps < 1 or args.steps < 1:
        ap.error("--reps and --steps must be at least 1")
    for name in args.workloads:
        if name not in WORKLOADS:
            ap.error("unknown workload %r" % name)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tmp = None
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        out = args.out
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_recorder_")
        out = tmp.name

    old = None
    if args.compare:
        spec = importlib.util.spec_from_file_location("memtl_torch_old", args.compare)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
    native = recorder.native_walk() is not None
    rows = []
    mem_rows = []
    same = []
    for name in args.workloads or list(WORKLOADS):
        step = WORKLOADS[name]()
        step()  # warm-up: optimizer state exists before profiling
        path = os.path.join(out, "%s_%dstep.trace.jsonl.gz" % (name, args.steps))
        best = {}
        for rep in range(args.reps):
            prof, tree_s = record(step, args.steps)
            results = prof.profiler.kineto_results
            start = time.perf_counter()
            roots = results.experimental_event_tree()
            call_s = time.perf_counter() - start
            start = time.perf_counter()
            walked = walk(roots)
            walk_s = time.perf_counter() - start
            del roots
            save_s, own_tree_s = timed_save(prof, path)
            sample = {"tree": tree_s, "call": call_s, "walk": walk_s, "save": save_s,
                      "net": save_s - own_tree_s}
            if native:
                py_save_s, py_own_tree_s = timed_python_save(prof, path + ".py.gz")
                sample["py_net"] = py_save_s - py_own_tree_s
            for k, v in sample.items():
                best[k] = min(best.get(k, v), v)
            print("%s rep %d: tree %.4f call %.6f walk %.4f save %.4f (own tree call %.6f) s, %d events"
                  % (name, rep, tree_s, call_s, walk_s, save_s, own_tree_s, walked), file=sys.stderr)
        events, raw = trace_stats(path)
        ratio = best["net"] / best["tree"]
        py_ratio = best["py_net"] / best["tree"] if native else None
        rows.append((name, events, best["tree"], best["call"], best["walk"], best["save"], best["net"],
                     ratio, best["net"] / best["walk"], py_ratio))

        # Memory, on the last profile (tracemalloc slows the save; not timed).
        tracemalloc.start()
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        recorder.save(prof, path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = rss_growth_during(functools.partial(recorder.save, prof, path))
        mem_rows.append((name, events, raw, peak - base, rss))

        if old is not None:
            # Same file name (the gzip header holds it), another directory.
            os.makedirs(os.path.join(out, "old"), exist_ok=True)
            old_path = os.path.join(out, "old", os.path.basename(path))
            old.save(prof, old_path)
            with open(path, "rb") as a, open(old_path, "rb") as b:
                new_bytes, old_bytes = a.read(), b.read()
            same.append((name, new_bytes == old_bytes, gzip.decompress(new_bytes) == gzip.decompress(old_bytes),
                         len(gzip.decompress(new_bytes))))

        if args.cprofile:
            pr = cProfile.Profile()
            pr.enable()
            recorder.save(prof, path)
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(15)
            print("cProfile of save, %s:\n%s" % (name, s.getvalue()), file=sys.stderr)
        del prof

    print("torch %s, Python %s, %d step(s) per profile, best of %d, 1 intra-op thread, %s walk%s\n"
          % (torch.__version__, sys.version.split()[0], args.steps, args.reps, "native" if native else "Python",
             "" if native else " (native: %s)" % recorder.NATIVE_ERROR))
    print("| workload | events | walk | tree s | save s | save-minus-tree s | ratio (save-minus-tree)/tree "
          "| target <= 2x met | python ratio | call s | walk s | (save-minus-tree)/walk |")
    print("|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for name, events, tree_s, call_s, walk_s, save_s, net_s, ratio, walk_ratio, py_ratio in rows:
        print("| %s | %d | %s | %.4f | %.4f | %.4f | %.2f | %s | %s | %.6f | %.4f | %.1f |"
              % (name, events, "native" if native else "Python", tree_s, save_s, net_s, ratio,
                 "yes" if ratio <= 2 else "no", "-" if py_ratio is None else "%.2f" % py_ratio,
                 call_s, walk_s, walk_ratio))
    print()
    print("| workload | events | uncompressed trace MiB | tracemalloc peak during save MiB | peak/trace "
          "| peak RSS growth during save MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, events, raw, peak, rss in mem_rows:
        print("| %s | %d | %.2f | %.2f | %.2f | %s |"
              % (name, events, raw / 2**20, peak / 2**20, peak / raw,
                 "n/a" if rss is None else "%.2f" % (rss / 2**20)))
    if old is not None:
        print()
        print("| workload | uncompressed bytes | decompressed identical to %s | .gz file identical |" % args.compare)
        print("|---|---:|---|---|")
        for name, file_same, raw_same, raw in same:
            print("| %s | %d | %s | %s |" % (name, raw, "yes" if raw_same else "NO", "yes" if file_same else "NO"))
    if tmp is not None:
        tmp.cleanup()
    if old is not None and not all(raw_same for _, _, raw_same, _ in same):
        sys.exit(1)


if __name__ == "__main__":
    main()
