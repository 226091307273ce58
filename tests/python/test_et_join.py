"""The execution-trace join (memtl ... KINETO --et ET): on runs recorded
three ways at once (collect/torch/record_et_fixtures.py: the Kineto trace,
the execution trace and memtl's own trace of one profile), the categories
memtl computes from the two PyTorch files equal those from its own trace.

What only the python tracer records, the modules' parameters and the
optimizers' parameters and state, neither file holds; where the Kineto
trace was recorded with the tracer (its python_function events), the join
rebuilds those records from the ops of the execution trace
(core/read/et/et_join_tracer.cpp), and the joined timeline is memtl's own
trace's row for row. Without the tracer's events there is nothing to
rebuild, and the joined timeline is memtl's own trace's with the tracer's
records taken out: PyTorch's answer without the tracer
(test_join_equals_the_own_trace_without_the_python_tracer drops the
python_function events from the Kineto trace to check that).

The Kineto reader adds, as its own tests say, one untracked allocation for
memory allocated before the profile that the trace's "Total Allocated"
shows; the join leaves it only what no tensor of the execution trace holds
(test_join_counts_memory_from_before_the_profile_once), and memtl's own
trace has no such row.

Needs no torch: run with the memtl command built,
    PYTHONPATH=python MEMTL_BIN=build/cli/memtl python -m pytest tests/python/test_et_join.py -q
"""

import collections
import gzip
import json
import os
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ET = os.path.join(ROOT, "fixtures", "et")
# The raw export's category numbers (PyTorch's _CATEGORY_TO_INDEX).
PARAMETER, OPTIMIZER_STATE, INPUT, ACTIVATION, UNKNOWN = 0, 1, 2, 4, 7


def memtl_bin():
    if os.environ.get("MEMTL_BIN"):
        return os.environ["MEMTL_BIN"]
    import memtl
    return memtl._memtl_command()


def memtl(*args):
    return subprocess.run([memtl_bin(), *args], capture_output=True, text=True)


def raw_rows(trace, *extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.raw.json.gz")
        r = memtl("export", trace, *extra, "-o", out)
        assert r.returncode == 0, r.stderr
        with gzip.open(out) as f:
            return collections.Counter(tuple(row) for row in json.load(f)), r.stderr


def joined(name):
    return raw_rows(os.path.join(ET, name + ".kineto.json.gz"), "--et",
                    os.path.join(ET, name + ".et.json.gz"))


def own(name):
    rows, _ = raw_rows(os.path.join(ET, name + ".trace.jsonl.gz"))
    return rows


def only_the_pre_profile_row(only_got):
    """The Kineto reader's memory from before the profile: at most one
    row, created, unknown (none in a process's first CPU profile)."""
    assert sum(only_got.values()) <= 1, only_got
    assert all(action == 2 and cat == UNKNOWN for (_, action, _, cat) in only_got), only_got


def equals_pytorch(name, got):
    """`got` is PyTorch's own timeline of the same profile
    (NAME.torch.raw.json.gz) row for row, but for the Kineto reader's one
    row of memory from before the profile."""
    with gzip.open(os.path.join(ET, name + ".torch.raw.json.gz")) as f:
        theirs = collections.Counter(tuple(row) for row in json.load(f))
    assert theirs - got == collections.Counter()
    only_the_pre_profile_row(got - theirs)


@pytest.mark.parametrize("name", ["e2e_fwd_bwd_sgd", "e2e_adam", "e2e_inference"])
def test_categories_equal_the_own_trace(name):
    """A training step (SGD, Adam from a cold start: the step creates its
    state) and inference (no backward pass, so only the modules' records
    prove the parameters, and the inputs and activations decided from
    them): every row of memtl's own trace, the optimizer state and the
    Adam step's scalars that the inputs pass marks only once the
    parameters are known included."""
    got, stderr = joined(name)
    mine = own(name)
    assert "(100.0%) by record function id" in stderr, stderr
    assert mine - got == collections.Counter()
    only_the_pre_profile_row(got - mine)
    cats = {row[3] for row in got}
    assert {PARAMETER, INPUT, ACTIVATION} <= cats
    if name != "e2e_inference":
        assert OPTIMIZER_STATE in cats


def test_reused_address_equals_pytorch():
    """A ResNet BatchNorm step (collect/torch/record_et_fixtures.py
    resnet_bn_sgd_step, with_stack=False) recorded on a run where the
    allocator gave the 8-byte scalar that num_batches_tracked.add_(1) wraps
    from a Python number, freed at once, and then a 64-byte batch-norm
    output the same address: the execution trace names both by one storage
    id. Both add_'s arguments fit the scalar's block; the join first mapped
    the buffer (the first argument) there, and gave the later block to it
    too. PyTorch's own timeline of the same profile
    (NAME.torch.raw.json.gz) must come out row for row, but for the Kineto
    reader's one row of memory from before the profile."""
    name = "resnet_bn_reused_address"
    got, stderr = joined(name)
    assert "(100.0%) by record function id" in stderr, stderr
    equals_pytorch(name, got)


def test_unowned_block_keeps_no_parameter():
    """Issue #38: torch.utils.checkpoint (collect/torch/record_et_fixtures.py
    checkpoint_rng, with_stack=False) saves the random-number generator's
    state, a 5056-byte block that no tensor of the execution trace owns,
    inside a record_function, before the block's first layer reads its
    parameters. A parameter from before the profile fits in it, and that
    was all the join went by: the block was a parameter (category 2, not
    unknown), and the parameter lost its pre-existing row. PyTorch's own
    timeline of the same profile (NAME.torch.raw.json.gz) must come out row
    for row, but for the Kineto reader's one row of memory from before the
    profile."""
    name = "checkpoint_rng"
    got, stderr = joined(name)
    # Two of the recomputation's aten::linear ops are no node of the
    # execution trace (their children are): PyTorch's profiler has no
    # arguments for them either where it counts, their allocations.
    assert "joined 189 of 191 ops" in stderr, stderr
    equals_pytorch(name, got)


def test_dataless_tensors_share_no_storage():
    """Issue #38: a Linear on the meta device and an empty CPU tensor beside
    a CPU Linear's forward and backward (collect/torch/record_et_fixtures.py
    dataless_null_storage, with_stack=False). The execution trace gives
    every tensor without data the null data pointer's storage id; the join
    took it for one storage with data, a phantom tensor that the empty CPU
    tensor shared with the meta ones, and on this run (the allocator gave
    two of the 8-byte scalars that the meta addmm wraps one address) the
    scalars came out TEMPORARY where PyTorch's profiler leaves them
    unknown. PyTorch's own timeline of the same profile
    (NAME.torch.raw.json.gz) must come out row for row, but for the Kineto
    reader's one row of memory from before the profile."""
    name = "dataless_null_storage"
    got, stderr = joined(name)
    assert "(100.0%) by record function id" in stderr, stderr
    equals_pytorch(name, got)


@pytest.mark.parametrize("name", ["compiled_backward", "fsdp2_adam"])
def test_compiled_and_wrapper_runs_equal_pytorch(name):
    """Issue #38, recorded with_stack=False (collect/torch/record_et_fixtures.py):
    compiled_backward, an MLP compiled by inductor, whose compiled backward
    allocates the bias gradients in generated code with no op around them
    (they were pre-existing GRADIENT tensors and unknown allocations at
    once, 144 bytes twice); fsdp2_adam, FSDP2 at world size 1, whose
    DTensor wrappers share the null data pointer's storage id (a phantom
    pre-existing 2048-byte tensor that every optimizer op bumped) and
    whose unsharded parameters are one TensorImpl given a new storage
    before the backward (unknown in the backward, PARAMETER in PyTorch).
    PyTorch's own timeline of the same profile (NAME.torch.raw.json.gz)
    must come out row for row, but for the Kineto reader's one row of
    memory from before the profile."""
    got, stderr = joined(name)
    assert "(100.0%) by record function id" in stderr, stderr
    assert "allocations (100.0%) are a tensor's storage" in stderr, stderr
    equals_pytorch(name, got)


def test_join_coverage_is_reported_and_summary_works():
    r = memtl("summary", os.path.join(ET, "e2e_adam.kineto.json.gz"), "--et",
              os.path.join(ET, "e2e_adam.et.json.gz"))
    assert r.returncode == 0, r.stderr
    assert "joined" in r.stderr and "allocations" in r.stderr
    assert "PARAMETER" in r.stdout


def test_et_needs_a_kineto_trace():
    r = memtl("categories", os.path.join(ET, "e2e_adam.trace.jsonl.gz"), "--et",
              os.path.join(ET, "e2e_adam.et.json.gz"))
    assert r.returncode == 2
    assert "--et goes with a Kineto trace" in r.stderr
    # An execution trace given as the trace says to pass it as --et.
    r = memtl("categories", os.path.join(ET, "e2e_adam.et.json.gz"))
    assert r.returncode == 2 and "--et" in r.stderr
    # Another run's execution trace joins nothing.
    r = memtl("categories", os.path.join(ET, "e2e_adam.kineto.json.gz"), "--et",
              os.path.join(ET, "e2e_inference.et.json.gz"))
    assert r.returncode == 2
    assert "joins none of the Kineto trace's" in r.stderr


# GPU runs (fixtures/et/cuda/: tests/gpu/record_inputs.py on an NVIDIA H200,
# torch 2.11.0+cu130). On a GPU the backward pass runs on the autograd
# engine's device thread, so the roots of two threads overlap in time and
# the caching allocator reuses a block freed on one thread at once on the
# other: memory events pair in time order, not in the op tree's pre-order.
CUDA = os.path.join(ET, "cuda")
CUDA_RUNS = ["mlp_sgd_momentum", "sdpa_attention", "convnet_bn_sgd"]
PAIRING_NOTES = ("Total Allocated", "already live", "double free", "live bytes below zero")


def cuda_path(name, kind):
    return os.path.join(CUDA, "%s.%s.json%s.gz" % (name, kind, "l" if kind == "trace" else ""))


def kineto_totals(name, device, path=None):
    """Per time, the trace's "Total Allocated" after the last [memory] event
    on `device` at that time."""
    with gzip.open(path or cuda_path(name, "kineto")) as f:
        trace = json.load(f)
    base = trace.get("baseTimeNanoseconds", 0)
    events = []
    for i, e in enumerate(trace["traceEvents"]):
        if e.get("name") != "[memory]":
            continue
        a = e["args"]
        dev = "cuda:%d" % a["Device Id"] if a["Device Type"] == 1 else "cpu"
        if dev == device and "Total Allocated" in a:
            whole, _, frac = str(e["ts"]).partition(".")
            ns = int(whole) * 1000 + int((frac + "000")[:3])
            events.append((ns + base, i, a["Total Allocated"]))
    return {t: total for t, _, total in sorted(events)}


@pytest.mark.parametrize("name", CUDA_RUNS)
def test_gpu_kineto_totals_equal_the_allocators(name):
    r = memtl("summary", cuda_path(name, "kineto"))
    assert r.returncode == 0, r.stderr
    for note in PAIRING_NOTES:
        assert note not in r.stderr, r.stderr
    # The exported curve's total after each time is the allocator's.
    rows, _ = raw_rows(cuda_path(name, "kineto"), "--device", "cuda:0")
    running, curve = 0, {}
    for (t, action, size, _), n in sorted(rows.items()):
        if action != 3:  # an increment of version changes no total
            running += size * n
        curve[t] = running
    times = sorted(curve)
    totals = kineto_totals(name, "cuda:0")
    assert len(totals) > 40
    for t, total in totals.items():
        before = [u for u in times if u <= t]
        assert curve[before[-1]] == total, (t, curve[before[-1]], total)


def per_row_categories(rows):
    """(time, action, bytes) -> sorted categories."""
    out = collections.defaultdict(list)
    for (t, action, size, cat), n in rows.items():
        out[(t, action, size)] += [cat] * n
    return {k: sorted(v) for k, v in out.items()}


def changed_categories(own_rows, got_rows):
    """Rows at one (time, action, bytes) whose category differs, as
    Counter((own category, joined category)), and the rows of each side
    that the other lacks, as Counter((action, category))."""
    a, b = per_row_categories(own_rows), per_row_categories(got_rows)
    changed, only_own, only_got = (collections.Counter() for _ in range(3))
    for k in set(a) | set(b):
        x, y = collections.Counter(a.get(k, [])), collections.Counter(b.get(k, []))
        rest_x, rest_y = list((x - y).elements()), list((y - x).elements())
        while rest_x and rest_y:
            changed[(rest_x.pop(), rest_y.pop())] += 1
        only_own.update((k[1], c) for c in rest_x)
        only_got.update((k[1], c) for c in rest_y)
    return changed, only_own, only_got


# Beyond the Kineto reader's one row of memory allocated before the profile
# (action 2, unknown), every row is equal, the optimizer state included
# (the join rebuilds the python tracer's records). (A few small tensors, ACTIVATION in memtl's
# own trace, came out INPUT or unknown, with version bumps only the join
# saw, while the join wrote gelu's string argument, which PyTorch's
# profiler does not capture, and took scaled_dot_product_attention's
# schema from PyTorch 1.13's table, which lacks it: both ops then matched
# no schema and were no node of the data-flow graph.)
@pytest.mark.parametrize("name", CUDA_RUNS)
def test_gpu_join_categories_equal_the_own_trace(name):
    got, stderr = raw_rows(cuda_path(name, "kineto"), "--et", cuda_path(name, "et"),
                           "--device", "cuda:0")
    assert "(100.0%) by record function id" in stderr, stderr
    for note in PAIRING_NOTES:
        assert note not in stderr, stderr
    mine, _ = raw_rows(cuda_path(name, "trace"), "--device", "cuda:0")
    changed, only_own, only_got = changed_categories(mine, got)
    assert changed == collections.Counter()
    assert only_own == collections.Counter()
    assert only_got == collections.Counter({(2, UNKNOWN): 1})


# A CPU run of tests/gpu/record_inputs.py (torch 2.13): a channels-last
# convnet with batch norm, two SGD steps. The join failed on it ("data-flow
# invariant broken at aten::cross_entropy_loss") when a storage was mapped
# to an address while that address was free at one of its reads (the
# batch-norm buffer num_batches_tracked took the block of the scalar that
# add_ wraps from the Python 1) or while another block was allocated there
# when an op created it (an mkldnn workspace took the weight gradient that
# convolution_backward creates after it). With the lifetimes respected,
# every category equals memtl's own trace's (no optimizer state to miss).
def test_cpu_channels_last_join_equals_the_own_trace():
    base = os.path.join(ET, "convnet_channels_last")
    got, stderr = raw_rows(base + ".kineto.json.gz", "--et", base + ".et.json.gz")
    assert "joined 532 of 532 ops (100.0%)" in stderr, stderr
    for note in PAIRING_NOTES:
        assert note not in stderr, stderr
    mine, _ = raw_rows(base + ".trace.jsonl.gz")
    changed, only_own, only_got = changed_categories(mine, got)
    assert changed == collections.Counter()
    assert only_own == collections.Counter()
    # Only the Kineto reader's memory from before the profile.
    assert only_got == collections.Counter({(2, UNKNOWN): 1})


def totals_at(rows, times):
    """The timeline's total after each of `times` (a version bump changes
    no total)."""
    running, curve = 0, []
    for t, action, size, _ in sorted(rows.elements()):
        if action != 3:
            running += size
        curve.append((t, running))
    out = []
    for t in times:
        before = [total for u, total in curve if u <= t]
        out.append(before[-1])
    return out


# Memory from before the profile is counted once. The Kineto reader adds
# the allocator's (its "Total Allocated" at the first event, less what the
# profile frees) as one allocation, and the execution trace shows tensors
# among it (parameters, optimizer state), which the timeline counts as
# pre-existing; the join leaves the allocation only the memory no tensor
# shows. So the joined total is the allocator's after every [memory] event,
# and memtl's own trace's plus that constant (before, mlp_sgd_momentum's
# was 680,016 bytes above both: its parameters and momentum buffers). On
# the CPU the allocator counts only memory allocated while a profiler ran,
# so in a process's first profile (e2e_fwd_bwd_sgd, e2e_adam) it counted
# none of the parameters, and the joined total equals memtl's own, above
# the allocator's by the tensors from before the profile, as PyTorch's
# timeline is.
PRE_PROFILE_RUNS = [
    (os.path.join(CUDA, name), "cuda:0", 0) for name in CUDA_RUNS
] + [
    (os.path.join(ET, "convnet_channels_last"), "cpu", 0),
    (os.path.join(ET, "e2e_inference"), "cpu", 0),
    (os.path.join(ET, "e2e_fwd_bwd_sgd"), "cpu", 336),
    (os.path.join(ET, "e2e_adam"), "cpu", 98816),
]


@pytest.mark.parametrize("base,device,above_allocator", PRE_PROFILE_RUNS,
                         ids=[os.path.basename(b) for b, _, _ in PRE_PROFILE_RUNS])
def test_join_counts_memory_from_before_the_profile_once(base, device, above_allocator):
    kineto = base + ".kineto.json.gz"
    got, _ = raw_rows(kineto, "--et", base + ".et.json.gz", "--device", device)
    mine, _ = raw_rows(base + ".trace.jsonl.gz", "--device", device)
    allocator = kineto_totals(None, device, kineto)
    times = sorted(allocator)
    assert len(times) >= 10
    joined = totals_at(got, times)
    assert {j - allocator[t] for j, t in zip(joined, times)} == {above_allocator}
    # memtl's own trace: below by a constant, the one row of memory no
    # tensor shows (unknown, created at the first event), if any.
    (below,) = {j - o for j, o in zip(joined, totals_at(mine, times))}
    first = min(t for (t, _, _, _) in got if t >= 0)
    rows_at_first = [size for (t, action, size, cat) in got if t == first and action == 2
                     and cat == UNKNOWN]
    assert below == 0 or below in rows_at_first


def without_python_tracer(trace, tmp):
    """memtl's own trace with what only the python tracer records taken out
    (the modules' and optimizers' parameters and state): what PyTorch's
    profiler sees without it."""
    out = os.path.join(tmp, "no_tracer.trace.jsonl")
    with gzip.open(trace, "rt") as f, open(out, "w") as g:
        for line in f:
            record = json.loads(line)
            if record.get("k") == "py":
                record.pop("module", None)
                record.pop("optimizer", None)
            g.write(json.dumps(record, separators=(",", ":")) + "\n")
    return out


def kineto_without_python_tracer(kineto, tmp):
    """The Kineto trace without its python_function events: as recorded
    with with_stack=False, for the join."""
    out = os.path.join(tmp, "no_tracer.kineto.json")
    with gzip.open(kineto, "rt") as f:
        trace = json.load(f)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "python_function"]
    with open(out, "w") as g:
        json.dump(trace, g)
    return out


ALL_RUNS = [(os.path.join(CUDA, name), "cuda:0") for name in CUDA_RUNS] + [
    (os.path.join(ET, name), "cpu") for name in
    ["e2e_fwd_bwd_sgd", "e2e_adam", "e2e_inference", "convnet_channels_last",
     "optimizers_indexing"]]


# With the python tracer's events, the join rebuilds its records: every
# row of memtl's own trace (PyTorch's answer, tests/python/test_oracle.py)
# but the Kineto reader's row of memory from before the profile. Failed
# before the join rebuilt the records (the optimizer state unknown, the
# parameters of inference unknown, the Adam scalars' INPUT), and before it
# wrote strings as PyTorch's profiler records them (not at all), took the
# schemas of the overloads a node ran from the execution trace where
# PyTorch 1.13's table lacks them, and wrote an empty list or a list of
# optional tensors only where the schema takes a tensor list:
# optimizers_indexing (fused AdamW, foreach Adam, aten::index, gelu with
# approximate, div with rounding_mode), mlp_sgd_momentum (gelu) and
# sdpa_attention (scaled_dot_product_attention).
@pytest.mark.parametrize("base,device", ALL_RUNS, ids=[os.path.basename(b) for b, _ in ALL_RUNS])
def test_join_equals_the_own_trace(base, device):
    got, stderr = raw_rows(base + ".kineto.json.gz", "--et", base + ".et.json.gz",
                           "--device", device)
    assert "(100.0%) by record function id" in stderr, stderr
    assert "cannot parse" not in stderr, stderr
    mine, _ = raw_rows(base + ".trace.jsonl.gz", "--device", device)
    assert mine - got == collections.Counter()
    only_the_pre_profile_row(got - mine)


# Without the python tracer's events there is nothing to rebuild: the join
# gives PyTorch's answer without the tracer, which is memtl's own trace's
# with the tracer's records taken out.
@pytest.mark.parametrize("base,device", ALL_RUNS, ids=[os.path.basename(b) for b, _ in ALL_RUNS])
def test_join_equals_the_own_trace_without_the_python_tracer(base, device):
    with tempfile.TemporaryDirectory() as tmp:
        got, stderr = raw_rows(kineto_without_python_tracer(base + ".kineto.json.gz", tmp),
                               "--et", base + ".et.json.gz", "--device", device)
        mine, _ = raw_rows(without_python_tracer(base + ".trace.jsonl.gz", tmp), "--device", device)
    assert "(100.0%) by record function id" in stderr, stderr
    assert mine - got == collections.Counter()
    only_the_pre_profile_row(got - mine)
