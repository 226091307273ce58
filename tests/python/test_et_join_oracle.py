"""The execution-trace join against PyTorch's own memory profiler.

One profile per scenario with an ExecutionTraceObserver attached, then
`memtl export KINETO --et ET` must give the raw timeline that
torch.profiler._memory_profiler computes for the same profile, row for row
(time, action, bytes, category), but for one row: the Kineto reader's
memory from before the profile that no tensor shows (unknown, created at
the first event), which PyTorch's timeline does not have.

- Without the python tracer (with_stack=False), which neither file
  records: every scenario.
- With it (PyTorch's default for export_memory_timeline): PyTorch reads
  modules' and optimizers' parameters and state from the tracer, and the
  join rebuilds those records from the files (core/read/et/
  et_join_tracer.cpp). Every scenario but FSDP2, where the join knows
  more than PyTorch's tracer: the shards it names PARAMETER and
  OPTIMIZER_STATE, PyTorch's tracer sees as DTensor wrappers without
  storage and leaves unknown (the test says exactly which rows).

    PYTHONPATH=python MEMTL_BIN=build/cli/memtl python -m pytest tests/python/test_et_join_oracle.py -q

Needs pytest and torch >= 2.0 with ExecutionTraceObserver; anywhere else the
module is skipped (CTest's python_torch1.13 run). The compiled scenarios
compile with inductor (a C++ compiler), DDP and FSDP2 make a process group
of one (gloo on a FileStore) around the profile.
"""

import collections
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

if importlib.util.find_spec("pytest") is None:
    raise unittest.SkipTest("the oracle tests need pytest")
import pytest  # noqa: E402

import torch  # noqa: E402

if int(torch.__version__.split(".")[0]) < 2 or not hasattr(torch.profiler, "ExecutionTraceObserver"):
    raise unittest.SkipTest("the join's oracle needs torch >= 2.0 (this is %s)" % torch.__version__)
if importlib.util.find_spec("torch.profiler._memory_profiler") is None:
    raise unittest.SkipTest("this torch (%s) has no torch.profiler._memory_profiler" % torch.__version__)

from torch.profiler import _memory_profiler  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "collect", "torch"))
import record_et_fixtures  # noqa: E402

# Scenarios of collect/torch/record_fixtures.py and record_et_fixtures.py:
# annotations and allocations outside ops, in-place ops, two steps, an SGD
# and an Adam step, and the ops whose schemas or arguments the join had
# wrong (fused AdamW, foreach Adam, aten::index, string arguments); then
# issue #38's: models compiled by inductor and aot_eager, checkpointing,
# LoRA with a frozen base, foreach, for-loop and fused optimizers over
# several steps (Adam also from a cold start), DDP and FSDP2 (world size
# 1, gloo).
SCENARIOS = ["dataflow_annotations", "dataflow_non_op_allocations", "dataflow_inplace",
             "dataflow_complicated", "dataflow_stacked_second_step", "e2e_fwd_bwd_sgd",
             "e2e_sequential_set_to_none_false", "e2e_adam", "e2e_custom_param",
             "resnet_bn_sgd_step", "null_undefined_grad", "optimizers_indexing",
             "compiled_backward", "compiled_aot_eager", "checkpoint_sgd", "lora_frozen",
             "sgd_foreach_3steps", "adam_forloop_3steps", "adam_cold_2steps",
             "adamw_fused_3steps", "ddp_adamw", "fsdp2_adam"]


# checkpoint's recomputation runs aten::linear ops that are no node of the
# execution trace (their children are): their arguments are not known, as
# in PyTorch's profiler where it counts, their allocations.
PARTLY_JOINED = {"checkpoint_sgd"}


def memtl_bin():
    if os.environ.get("MEMTL_BIN"):
        return os.environ["MEMTL_BIN"]
    import memtl
    return memtl.binary()


def compare(name, with_stack):
    """PyTorch's rows and memtl's for one profile of scenario `name`:
    (rows only PyTorch has, rows only memtl has), as Counters."""
    with tempfile.TemporaryDirectory() as tmp:
        prof, et_path, kineto = record_et_fixtures.profile_with_et(name, tmp, with_stack=with_stack)
        # export_memory_timeline asks for with_stack; the profile itself
        # does not need it.
        timeline = _memory_profiler.MemoryProfileTimeline(
            _memory_profiler.MemoryProfile(prof.profiler.kineto_results))
        theirs_path = os.path.join(tmp, "torch.raw.json")
        timeline.export_memory_timeline_raw(theirs_path, "cpu")
        with open(theirs_path) as f:
            theirs = collections.Counter(tuple(row) for row in json.load(f))
        ours_path = os.path.join(tmp, "memtl.raw.json.gz")
        r = subprocess.run([memtl_bin(), "export", kineto, "--et", et_path, "--device", "cpu",
                            "-o", ours_path], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        if name not in PARTLY_JOINED:
            assert "(100.0%) by record function id" in r.stderr, r.stderr
        with gzip.open(ours_path) as f:
            ours = collections.Counter(tuple(row) for row in json.load(f))
    return theirs - ours, ours - theirs


def only_the_pre_profile_row(extra):
    """The Kineto reader's memory from before the profile: at most one
    row, created, unknown."""
    assert sum(extra.values()) <= 1, extra
    assert all(action == 2 and category == 7 for (_, action, _, category) in extra), extra


@pytest.mark.parametrize("name", SCENARIOS)
def test_join_equals_pytorch_without_the_python_tracer(name):
    missing, extra = compare(name, with_stack=False)
    assert missing == collections.Counter()
    only_the_pre_profile_row(extra)


@pytest.mark.parametrize("name", SCENARIOS)
def test_join_equals_pytorch_with_the_python_tracer(name):
    """With the python tracer PyTorch reads modules' parameters and
    optimizers' parameters and state from it; the join rebuilds those
    records from the files (et_join_tracer.cpp) and must give PyTorch's
    rows but where it knows more: FSDP2's parameters and optimizer state
    are DTensors, wrappers whose storage is the null data pointer, so
    PyTorch's tracer names no storage and leaves the local shards unknown
    (pre-existing) while the join names them PARAMETER and
    OPTIMIZER_STATE; the step's scalars then follow the parameters to
    INPUT, as they do wherever PyTorch knows the parameters."""
    missing, extra = compare(name, with_stack=True)
    if name == "fsdp2_adam":
        # Every row PyTorch leaves unknown and memtl does not: the shards
        # (pre-existing, action 1, and their updates, action 3) and the
        # step's scalars (created and destroyed, INPUT).
        known = {(1, 0), (1, 1), (3, 0), (3, 1), (2, 2), (4, 2)}
        assert all(c == 7 for (_, _, _, c) in missing), missing
        assert all((a, c) in known or (a, c) == (2, 7) for (_, a, _, c) in extra), extra
        moved = collections.Counter(row[:3] for row in missing.elements())
        rest = collections.Counter(row[:3] for row in extra.elements() if row[1:4:2] in known)
        assert rest == moved, (rest, moved)
        assert sum(n * b for (_, a, b, c), n in extra.items() if a == 1 and c == 1) == 5424
        assert sum(n * b for (_, a, b, c), n in extra.items() if a == 1 and c == 0) == 2704
        return
    assert missing == collections.Counter()
    only_the_pre_profile_row(extra)
