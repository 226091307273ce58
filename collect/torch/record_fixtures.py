"""Records memtl's fixtures (CPU only).

    /usr/bin/python3 collect/torch/record_fixtures.py --out fixtures/             # Debian's torch 1.13
    python collect/torch/record_fixtures.py --out fixtures/torch2                 # a torch 2.x
    python collect/torch/record_fixtures.py --list                                # the scenarios

The fixtures in fixtures/ are recorded with Debian's torch 1.13; a torch 2.x
records into fixtures/torch2 unless --out says otherwise, so that the two
never overwrite each other.

Each scenario mirrors a test of PyTorch's test/profiler/test_memory_profiler.py
(TestDataFlow and TestMemoryProfilerE2E): inputs are created outside the
profiler, the step runs inside it, and gc.collect() runs inside the profiler as
PyTorch's `_run_and_format_data_flow` does. The real-model fixture is one
resnet18 SGD-momentum training step at a small input.

SCENARIOS is shared with the oracle tests (tests/python/workloads.py), which
profile each scenario with torch 2.x and compare memtl's answers with
PyTorch's own memory profiler.
"""

import argparse
import concurrent.futures
import contextlib
import dataclasses
import gc
import importlib.util
import os
import sys
import threading
from typing import Callable, ContextManager, Optional, Tuple

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def profile():
    return torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True)


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str    # the fixture's stem: fixtures/<name>.trace.jsonl.gz
    group: str   # "dataflow", "e2e" or "resnet" (--only)
    # Builds what the step needs (warm-up steps included) outside the
    # profiler; returns (inputs, step): step(**inputs) is what is profiled.
    setup: Callable[[], Tuple[dict, Callable]]
    needs: Tuple[str, ...] = ()  # modules it imports beyond torch
    # What runs around the profile (other Python threads kept alive from
    # before it starts until after it ends), or None.
    background: Optional[Callable[[], ContextManager]] = None

    def missing(self):
        """The modules this scenario needs that are not installed."""
        return [m for m in self.needs if importlib.util.find_spec(m) is None]


def run(scenario, seed=True):
    """Profiles one scenario and returns the finished profile. `seed` seeds
    torch's generator first; the fixture recorder instead seeds once per
    group, as the fixtures were first recorded (the scenarios of a group draw
    their parameters one after another from that stream)."""
    if seed:
        torch.manual_seed(0)
    inputs, step = scenario.setup()
    with scenario.background() if scenario.background else contextlib.nullcontext():
        with profile() as prof:
            outputs = step(**inputs)  # held until the profiler exits, as PyTorch's test helper does
            gc.collect()
        del outputs
    return prof


SCENARIOS = []


def scenario(name, group, needs=(), background=None):
    def register(setup):
        SCENARIOS.append(Scenario(name, group, setup, tuple(needs), background))
        return setup
    return register


# ---- TestDataFlow -----------------------------------------------------------

@scenario("dataflow_annotations", "dataflow")
def _annotations():
    def step(x, y):
        with torch.profiler.record_function("Namespaced::Annotation"):
            with torch.profiler.record_function("My Annotation"):
                x.zero_()
                y.zero_()
                return {"x0": torch.ones_like(x), "y0": torch.zeros_like(y)}

    return {"x": torch.ones((1,)), "y": torch.ones((1,))}, step


@scenario("dataflow_non_op_allocations", "dataflow")
def _non_op_allocations():
    return {"x": torch.ones((1,))}, lambda x: x.mul(2)


def _simple(x, y):
    z = x.mul(y)
    return {"z": z.view_as(z)}


def _simple_inputs():
    return {"x": torch.ones((25,)), "y": torch.ones((25,), requires_grad=True)}


@scenario("dataflow_simple", "dataflow")
def _simple_scenario():
    return _simple_inputs(), _simple


@scenario("dataflow_simple_no_grad", "dataflow")
def _simple_no_grad():
    def step(x, y):
        with torch.no_grad():
            return _simple(x, y)

    return _simple_inputs(), step


def _inplace(x, y):
    x.mul_(y)


@scenario("dataflow_inplace", "dataflow")
def _inplace_scenario():
    return _simple_inputs(), _inplace


@scenario("dataflow_inplace_no_grad", "dataflow")
def _inplace_no_grad():
    def step(x, y):
        with torch.no_grad():
            _inplace(x, y)

    return _simple_inputs(), step


@scenario("dataflow_simple_backward", "dataflow")
def _simple_backward():
    return ({"x": torch.ones((1,)), "w": torch.ones((1,), requires_grad=True)},
            lambda x, w: (x * w).sin().backward())


@scenario("dataflow_complicated", "dataflow")
def _complicated():
    def step():
        x = torch.ones((25,))
        y = x.mul(2).add_(2)
        z = torch.sin(y, out=torch.empty_like(y))
        return {"x": x, "y": y, "z": z}

    return {}, step


def _stacked(x, w0, w1):
    return x.mul(w0).relu().mul(w1).relu().sum()


def _stacked_fwd_bwd(**kw):
    loss = _stacked(**kw)
    loss.backward()
    return {"loss": loss}


def _stacked_inputs():
    return {"x": torch.ones((25,)), "w0": torch.ones((1,), requires_grad=True),
            "w1": torch.ones((1,), requires_grad=True)}


@scenario("dataflow_stacked_fwd", "dataflow")
def _stacked_fwd():
    def step(**kw):
        with torch.no_grad():
            return {"loss": _stacked(**kw)}

    return _stacked_inputs(), step


@scenario("dataflow_stacked_fwd_bwd", "dataflow")
def _stacked_fwd_bwd_scenario():
    return _stacked_inputs(), _stacked_fwd_bwd


@scenario("dataflow_stacked_second_step", "dataflow")
def _stacked_second_step():
    warm = _stacked_inputs()
    _stacked_fwd_bwd(**warm)  # grads exist before the profiled step
    return warm, _stacked_fwd_bwd


# ---- TestMemoryProfilerE2E ----------------------------------------------------

class ScaleLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.rand(()), requires_grad=True)

    def forward(self, x):
        return x * self.scale


def _small():
    return torch.nn.Sequential(torch.nn.Linear(2, 4, bias=True), torch.nn.ReLU(),
                               torch.nn.Linear(4, 4, bias=False), torch.nn.Softmax(dim=1))


def _fwd_bwd(model):
    x = torch.ones((2, 2))
    targets = torch.ones((2, 4))
    y = model(x)
    loss = torch.sum((y - targets) ** 2).mean()
    loss.backward()


@scenario("e2e_simple_fwd", "e2e")
def _simple_fwd():
    model = _small()
    return {}, lambda: model(torch.ones((2, 2)))


@scenario("e2e_fwd_bwd", "e2e")
def _fwd_bwd_scenario():
    model = _small()
    return {}, lambda: _fwd_bwd(model)


@scenario("e2e_fwd_bwd_sgd", "e2e")
def _fwd_bwd_sgd():
    model = _small()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step():
        _fwd_bwd(model)
        sgd.step()

    step()  # momentum buffers exist before the profiled step
    return {}, step


def _sequential(set_to_none):
    def setup():
        model = _small()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def two_steps():
            for _ in range(2):
                opt.zero_grad(set_to_none=set_to_none)
                _fwd_bwd(model)
                opt.step()

        return {}, two_steps

    return setup


# True before False: the order the fixtures were recorded in (one seed per group).
for _set_to_none in (True, False):
    scenario("e2e_sequential_set_to_none_%s" % str(_set_to_none).lower(), "e2e")(_sequential(_set_to_none))


@scenario("e2e_adam", "e2e")
def _adam():
    model = torch.nn.Sequential(torch.nn.Linear(64, 128, bias=True), torch.nn.ReLU(),
                                torch.nn.Linear(128, 128, bias=False), torch.nn.Softmax(dim=1))
    adam = torch.optim.Adam(model.parameters(), lr=0.1)

    def step():
        x = torch.ones((32, 64))
        targets = torch.ones((32, 128))
        y = model(x)
        loss = torch.nn.functional.mse_loss(y, targets)
        loss.backward()
        adam.step()
        adam.zero_grad()

    return {}, step


@scenario("e2e_custom_param", "e2e")
def _custom_param():
    model = torch.nn.Sequential(torch.nn.Linear(2, 4), ScaleLayer())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        opt.zero_grad()
        model(torch.ones((2, 2))).sum().backward()
        opt.step()

    return {}, step


@scenario("e2e_inference", "e2e")
def _inference():
    model = _small()

    def step():
        with torch.no_grad():
            model(torch.ones((8, 2)))

    return {}, step


# ---- a real model ---------------------------------------------------------------

@scenario("resnet18_sgd_step", "resnet", needs=("torchvision",))
def _resnet18():
    import torchvision

    return _sgd_momentum_step(torchvision.models.resnet18(num_classes=10), torch.randn(2, 3, 32, 32))


def _sgd_momentum_step(model, x):
    """A classifier's training step (cross entropy on labels 1 and 7, SGD
    with momentum), run once so that the momentum buffers exist."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    y = torch.tensor([1, 7])

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    step()  # warm-up: momentum buffers exist
    return {}, step


class _Block(torch.nn.Module):
    """resnet's basic block written out (PyPI's torchvision does not import
    beside the torch 2.13 wheel): conv-bn-relu-conv-bn plus the shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        nn = torch.nn
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


@scenario("resnet_bn_sgd_step", "resnet")
def _resnet_bn():
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          _Block(8, 8, 1), _Block(8, 16, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 10))
    return _sgd_momentum_step(model, torch.randn(2, 3, 16, 16))


# ---- tensors without storage ------------------------------------------------------
# PyTorch's memory profiler gives a tensor whose storage pointer is null no
# TensorKey: it joins no edge and matches a Tensor schema argument only
# where None would. One scenario per way such a tensor reaches an op.

@scenario("null_out_empty", "null")
def _null_out_empty():
    # torch.empty(0) as out=: the op receives a storage-less tensor and resizes it.
    return {"x": torch.ones((25,))}, lambda x: {"y": torch.abs(x, out=torch.empty(0))}


@scenario("null_unary_resize", "null")
def _null_unary_resize():
    # x.abs() makes a 0-element result, then resizes it in its out= variant.
    return {"x": torch.ones((25,))}, lambda x: {"y": x.abs(), "z": x.neg().sin()}


@scenario("null_undefined_grad", "null")
def _null_undefined_grad():
    # LayerNorm's backward kernel resizes storage-less tensors into the
    # gradients it returns (aten::resize_ inside native_layer_norm_backward).
    norm = torch.nn.LayerNorm(8)

    def step(x):
        norm(x).sum().backward()

    return {"x": torch.ones((4, 8))}, step


# ---- other live Python threads ------------------------------------------------------
# Training scripts keep other Python threads alive (a DataLoader's pin-memory
# thread, a logger, a thread pool's idle workers). torch 2.x's python tracer
# records their stacks too, under thread id 2^64-1 when they run no op; 1.13
# traces the profiling thread only. The step is an SGD-momentum step of the
# small model; only the threads around it differ.

@contextlib.contextmanager
def _waiting_thread():
    """A thread of our own, waiting on an Event for the whole profile."""
    done = threading.Event()
    thread = threading.Thread(target=done.wait, name="memtl-waiting", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=10)


@contextlib.contextmanager
def _idle_pool():
    """A ThreadPoolExecutor whose one worker ran a task and now waits."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="memtl-pool")
    pool.submit(sum, (1, 2)).result()
    try:
        yield
    finally:
        pool.shutdown(wait=True)


def _sgd_step_of_small(batches=None):
    model = _small()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step():
        for x in batches if batches is not None else [torch.ones((2, 2))]:
            loss = torch.sum((model(x) - torch.ones((2, 4))) ** 2).mean()
            loss.backward()
            sgd.step()
            sgd.zero_grad(set_to_none=True)

    return {}, step


@scenario("threads_event_wait", "threads", background=_waiting_thread)
def _threads_event_wait():
    return _sgd_step_of_small()


@scenario("threads_pool_idle", "threads", background=_idle_pool)
def _threads_pool_idle():
    return _sgd_step_of_small()


@scenario("threads_dataloader", "threads", background=_waiting_thread)
def _threads_dataloader():
    # Batches from a DataLoader (no worker processes, no pin-memory thread:
    # the waiting thread stands in for those), drawn inside the profile.
    data = torch.utils.data.TensorDataset(torch.rand(4, 2))
    loader = torch.utils.data.DataLoader(data, batch_size=2, num_workers=0, pin_memory=False)
    return _sgd_step_of_small(batches=(x for (x,) in loader))


# ---- torch.compile ---------------------------------------------------------------------
# The forward and backward run in code inductor generated (its cached
# files, torchinductor_<user>/xx/c....py): categories stay PyTorch's, and the
# explaining outputs show the user's frame around the generated one as a
# compiled region (docs/categories.md).

@scenario("compiled_mlp_sgd", "compiled", needs=("torch._inductor",))
def _compiled_mlp_sgd():
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(),
                                              torch.nn.Linear(8, 2)))
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)

    def step():
        sgd.zero_grad(set_to_none=True)
        model(x).sum().backward()
        sgd.step()

    step()  # compiles the forward and the backward before the profile
    return {}, step


GROUPS = ("dataflow", "e2e", "resnet", "null", "threads", "compiled")


def default_out():
    """fixtures/ holds torch 1.x recordings; a torch 2.x writes beside them."""
    major = int(torch.__version__.split(".")[0])
    return os.path.join("fixtures", "torch2") if major >= 2 else "fixtures"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None,
                    help="directory to record into (default: %s with this torch)" % default_out())
    ap.add_argument("--only", choices=GROUPS, default=None, help="record one group only")
    ap.add_argument("--scenario", action="append", default=[], metavar="NAME",
                    help="record only this scenario (repeatable; seeded on its own)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = ap.parse_args()
    if args.list:
        for s in SCENARIOS:
            print("%-36s %s%s" % (s.name, s.group, "  (needs %s)" % ", ".join(s.needs) if s.needs else ""))
        return 0
    names = {s.name for s in SCENARIOS}
    unknown = [n for n in args.scenario if n not in names]
    if unknown:
        ap.error("unknown scenario %s (see --list)" % ", ".join(unknown))

    sys.path.insert(0, os.path.join(ROOT, "python"))  # the source tree's memtl package
    import memtl

    out = args.out or default_out()
    os.makedirs(out, exist_ok=True)
    chosen = [s for s in SCENARIOS
              if (not args.scenario or s.name in args.scenario) and args.only in (None, s.group)]
    seeded = set()
    status = 0
    for s in chosen:
        missing = s.missing()
        if missing:
            print("%s: not recorded: needs %s" % (s.name, ", ".join(missing)), file=sys.stderr)
            status = 1
            continue
        # One seed per group, in list order (what the fixtures were recorded
        # with); a scenario picked by name is seeded on its own.
        if args.scenario:
            torch.manual_seed(0)
        elif s.group not in seeded:
            seeded.add(s.group)
            torch.manual_seed(0)
        prof = run(s, seed=False)
        path = os.path.join(out, s.name + ".trace.jsonl.gz")
        memtl.save(prof, path)
        print("%-40s %8d bytes" % (path, os.path.getsize(path)))
    return status


if __name__ == "__main__":
    sys.exit(main())
