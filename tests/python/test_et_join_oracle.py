"""The execution-trace join against PyTorch's own memory profiler.

One profile per scenario with an ExecutionTraceObserver attached and without
the python tracer (with_stack=False), which neither file records; then
`memtl export KINETO --et ET` must give the raw timeline that
torch.profiler._memory_profiler computes for the same profile, row for row
(time, action, bytes, category), but for one row: the Kineto reader's
memory from before the profile that no tensor shows (unknown, created at the
first event), which PyTorch's timeline does not have.

    PYTHONPATH=python MEMTL_BIN=build/cli/memtl python -m pytest tests/python/test_et_join_oracle.py -q

Needs pytest and torch >= 2.0 with ExecutionTraceObserver; anywhere else the
module is skipped (CTest's python_torch1.13 run).
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


@pytest.mark.parametrize("name", SCENARIOS)
def test_join_equals_pytorch_without_the_python_tracer(name):
    with tempfile.TemporaryDirectory() as tmp:
        prof, et_path, kineto = record_et_fixtures.profile_with_et(name, tmp, with_stack=False)
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
    assert theirs - ours == collections.Counter()
    extra = ours - theirs
    assert sum(extra.values()) <= 1, extra
    assert all(action == 2 and category == 7 for (_, action, _, category) in extra), extra
