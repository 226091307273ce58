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

The scenarios of TORCH_RAW are recorded without the python tracer
(with_stack=False) and written with PyTorch's own raw timeline of the same
profile (NAME.torch.raw.json.gz, torch.profiler._memory_profiler) in place
of memtl's own trace.

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


def _checkpoint_rng():
    """torch.utils.checkpoint over Linear-ReLU-Linear inside a
    record_function: checkpoint saves the random-number generator's state
    (a block that no tensor of the execution trace owns, and PyTorch's
    memory profiler leaves unknown) inside the annotation, before the
    block's first layer reads its parameters, which fit in it (issue #38:
    the join gave the block the first parameter that fits)."""
    blk = torch.nn.Sequential(torch.nn.Linear(16, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))
    head = torch.nn.Linear(16, 4)

    def step():
        with torch.profiler.record_function("## forward ##"):
            x = torch.randn(8, 16, requires_grad=True)
            h = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
            loss = head(h).sum()
        loss.backward()

    return {}, step


def _dataless_null_storage():
    """Tensors without data (issue #38): a Linear on the meta device run on
    a meta input, and an empty CPU tensor, beside a CPU Linear's forward
    and backward. The execution trace gives all of them the null data
    pointer's storage id (FSDP2's DTensor wrappers share it too), which the
    join took for one pre-existing storage."""
    lin = torch.nn.Linear(16, 16)
    with torch.device("meta"):
        big = torch.nn.Linear(64, 64)
    x = torch.randn(4, 16)
    kept = []  # alive past the profile, as a caller's would be

    def step():
        y = lin(x)
        kept.append(big(torch.empty(4, 64, device="meta")))
        kept.append(torch.empty(0))
        y.sum().backward()
        kept.append(y)

    return {}, step


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _training(model, opt, warm, steps):
    """`warm` unprofiled steps of `opt` on `model`, then a step function
    that runs `steps` of them (zero_grad, forward, backward, step)."""
    x = torch.randn(8, 16)

    def one():
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()

    for _ in range(warm):
        one()

    def step():
        for _ in range(steps):
            one()

    return {}, step


def _compiled_backward():
    """An MLP compiled by inductor (issue #38, error 2): the compiled
    backward allocates the bias gradients in generated code, with no op
    around them, and AccumulateGrad reads them after the region."""
    model = torch.compile(_mlp())
    return _training(model, torch.optim.SGD(model.parameters(), lr=0.1), 1, 1)


def _compiled_aot_eager():
    """The same MLP compiled with aot_eager: the compiled forward and
    backward run ATen ops inside CompiledFunction(Backward)."""
    model = torch.compile(_mlp(), backend="aot_eager")
    return _training(model, torch.optim.SGD(model.parameters(), lr=0.1), 1, 1)


def _checkpoint_sgd():
    """torch.utils.checkpoint over a block, with SGD momentum (warm): the
    block's forward runs again in the backward."""
    blk = torch.nn.Sequential(torch.nn.Linear(16, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))
    head = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(list(blk.parameters()) + list(head.parameters()), lr=0.1, momentum=0.9)
    x = torch.randn(8, 16)

    def step():
        opt.zero_grad(set_to_none=True)
        h = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False)
        head(h).sum().backward()
        opt.step()

    step()
    return {}, step


def _lora_frozen():
    """LoRA: a frozen Linear (requires_grad False) plus trained low-rank
    factors, AdamW on the factors only (warm)."""
    base = torch.nn.Linear(32, 32)
    base.requires_grad_(False)
    a = torch.nn.Parameter(torch.randn(4, 32) * 0.01)
    b = torch.nn.Parameter(torch.zeros(32, 4))
    opt = torch.optim.AdamW([a, b])
    x = torch.randn(8, 32)

    def step():
        opt.zero_grad(set_to_none=True)
        (base(x) + x @ a.t() @ b.t()).sum().backward()
        opt.step()

    step()
    return {}, step


def _sgd_foreach_3steps():
    model = _mlp()
    return _training(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True),
                     1, 3)


def _adam_forloop_3steps():
    model = _mlp()
    return _training(model, torch.optim.Adam(model.parameters(), foreach=False), 1, 3)


def _adam_cold_2steps():
    """No warm step: the first profiled step creates Adam's state."""
    model = _mlp()
    return _training(model, torch.optim.Adam(model.parameters(), foreach=False), 0, 2)


def _adamw_fused_3steps():
    model = _mlp()
    return _training(model, torch.optim.AdamW(model.parameters(), fused=True), 1, 3)


def _ddp_adamw():
    """DistributedDataParallel at world size 1 (gloo): the reducer's
    gradient buckets."""
    model = torch.nn.parallel.DistributedDataParallel(_mlp())
    return _training(model, torch.optim.AdamW(model.parameters()), 1, 1)


def _fsdp2_adam():
    """FSDP2 (fully_shard) at world size 1 (gloo, issue #38, error 1):
    DTensor parameters and optimizer state (wrapper subclasses, whose
    storage is the null data pointer's), unsharded parameters allocated
    before the forward, freed after it, allocated again for the backward."""
    from torch.distributed.fsdp import fully_shard

    model = _mlp()
    fully_shard(model[0])
    fully_shard(model)
    return _training(model, torch.optim.Adam(model.parameters()), 1, 1)


# Scenarios of the execution-trace fixtures only.
SCENARIOS["optimizers_indexing"] = _Scenario("optimizers_indexing", _optimizers_indexing)
for _f in (_compiled_backward, _compiled_aot_eager, _checkpoint_sgd, _lora_frozen,
           _sgd_foreach_3steps, _adam_forloop_3steps, _adam_cold_2steps, _adamw_fused_3steps,
           _ddp_adamw, _fsdp2_adam):
    SCENARIOS[_f.__name__[1:]] = _Scenario(_f.__name__[1:], _f)
# Scenarios that need a process group (one of world size 1, made for the
# profile and destroyed after it: a group left behind would give every
# later memtl.save in the process a rank).
NEEDS_GROUP = {"ddp_adamw", "fsdp2_adam"}
SCENARIOS["checkpoint_rng"] = _Scenario("checkpoint_rng", _checkpoint_rng)
SCENARIOS["dataless_null_storage"] = _Scenario("dataless_null_storage", _dataless_null_storage)
# Recorded without the python tracer (with_stack=False), with PyTorch's own
# raw timeline of the same profile (NAME.torch.raw.json.gz) instead of
# memtl's own trace: tests/python/test_et_join.py compares row for row.
TORCH_RAW = ["checkpoint_rng", "dataless_null_storage", "compiled_backward", "fsdp2_adam"]


def gzip_to(src, dst):
    # mtime 0: the same file gives the same bytes.
    with open(src, "rb") as fin, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as fout:
            shutil.copyfileobj(fin, fout)


def profile_with_et(name, tmp, with_stack):
    """Runs scenario `name` once under the profiler with an execution trace
    observer; returns the profile and the paths of the execution trace and
    the Kineto trace, both written into `tmp`."""
    group = name in NEEDS_GROUP
    if group:
        import torch.distributed as dist
        dist.init_process_group("gloo", store=dist.FileStore(os.path.join(tmp, "store"), 1),
                                rank=0, world_size=1)
    try:
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
    finally:
        if group:
            dist.destroy_process_group()
    return prof, et_path, kineto


def record(name, out):
    with tempfile.TemporaryDirectory() as tmp:
        prof, et_path, kineto = profile_with_et(name, tmp, with_stack=True)
        gzip_to(kineto, os.path.join(out, name + ".kineto.json.gz"))
        gzip_to(et_path, os.path.join(out, name + ".et.json.gz"))
    memtl.save(prof, os.path.join(out, name + ".trace.jsonl.gz"))


def record_with_torch_raw(name, out):
    from torch.profiler import _memory_profiler
    with tempfile.TemporaryDirectory() as tmp:
        prof, et_path, kineto = profile_with_et(name, tmp, with_stack=False)
        timeline = _memory_profiler.MemoryProfileTimeline(
            _memory_profiler.MemoryProfile(prof.profiler.kineto_results))
        raw = os.path.join(tmp, "torch.raw.json")
        timeline.export_memory_timeline_raw(raw, "cpu")
        gzip_to(kineto, os.path.join(out, name + ".kineto.json.gz"))
        gzip_to(et_path, os.path.join(out, name + ".et.json.gz"))
        gzip_to(raw, os.path.join(out, name + ".torch.raw.json.gz"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "fixtures", "et"))
    parser.add_argument("names", nargs="*", help="scenarios to record (default: all)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.names or NAMES + TORCH_RAW:
        (record_with_torch_raw if name in TORCH_RAW else record)(name, args.out)
        print(name)


if __name__ == "__main__":
    main()
