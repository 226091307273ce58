"""Records memtl's fixtures with Debian's torch (CPU only).

    /usr/bin/python3 collect/torch/record_fixtures.py --out fixtures/

Each scenario mirrors a test of PyTorch's test/profiler/test_memory_profiler.py
(TestDataFlow and TestMemoryProfilerE2E): inputs are created outside the
profiler, the step runs inside it, and gc.collect() runs inside the profiler as
PyTorch's `_run_and_format_data_flow` does. The real-model fixture is one
resnet18 SGD-momentum training step at a small input.
"""

import argparse
import gc
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memtl_torch  # noqa: E402


def profile():
    return torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True)


def record(out_dir, name, inputs, fn):
    with profile() as prof:
        outputs = fn(**inputs)  # held until the profiler exits, as PyTorch's test helper does
        gc.collect()
    del outputs
    path = os.path.join(out_dir, name + ".trace.jsonl.gz")
    memtl_torch.save(prof, path)
    print("%-40s %8d bytes" % (path, os.path.getsize(path)))


# ---- TestDataFlow -----------------------------------------------------------

def dataflow(out):
    def annotations(x, y):
        with torch.profiler.record_function("Namespaced::Annotation"):
            with torch.profiler.record_function("My Annotation"):
                x.zero_()
                y.zero_()
                return {"x0": torch.ones_like(x), "y0": torch.zeros_like(y)}

    record(out, "dataflow_annotations", {"x": torch.ones((1,)), "y": torch.ones((1,))}, annotations)
    record(out, "dataflow_non_op_allocations", {"x": torch.ones((1,))}, lambda x: x.mul(2))

    def simple(x, y):
        z = x.mul(y)
        return {"z": z.view_as(z)}

    def simple_no_grad(x, y):
        with torch.no_grad():
            return simple(x, y)

    inputs = {"x": torch.ones((25,)), "y": torch.ones((25,), requires_grad=True)}
    record(out, "dataflow_simple", inputs, simple)
    record(out, "dataflow_simple_no_grad", inputs, simple_no_grad)

    def inplace(x, y):
        x.mul_(y)

    def inplace_no_grad(x, y):
        with torch.no_grad():
            inplace(x, y)

    record(out, "dataflow_inplace", {"x": torch.ones((25,)), "y": torch.ones((25,), requires_grad=True)}, inplace)
    record(out, "dataflow_inplace_no_grad", {"x": torch.ones((25,)), "y": torch.ones((25,), requires_grad=True)},
           inplace_no_grad)

    record(out, "dataflow_simple_backward", {"x": torch.ones((1,)), "w": torch.ones((1,), requires_grad=True)},
           lambda x, w: (x * w).sin().backward())

    def complicated():
        x = torch.ones((25,))
        y = x.mul(2).add_(2)
        z = torch.sin(y, out=torch.empty_like(y))
        return {"x": x, "y": y, "z": z}

    record(out, "dataflow_complicated", {}, complicated)

    def stacked(x, w0, w1):
        return x.mul(w0).relu().mul(w1).relu().sum()

    def stacked_fwd(**kw):
        with torch.no_grad():
            return {"loss": stacked(**kw)}

    def stacked_fwd_bwd(**kw):
        loss = stacked(**kw)
        loss.backward()
        return {"loss": loss}

    def stacked_inputs():
        return {"x": torch.ones((25,)), "w0": torch.ones((1,), requires_grad=True),
                "w1": torch.ones((1,), requires_grad=True)}

    record(out, "dataflow_stacked_fwd", stacked_inputs(), stacked_fwd)
    record(out, "dataflow_stacked_fwd_bwd", stacked_inputs(), stacked_fwd_bwd)
    warm = stacked_inputs()
    stacked_fwd_bwd(**warm)  # grads exist before the profiled step
    record(out, "dataflow_stacked_second_step", warm, stacked_fwd_bwd)


# ---- TestMemoryProfilerE2E ----------------------------------------------------

class ScaleLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.rand(()), requires_grad=True)

    def forward(self, x):
        return x * self.scale


def e2e(out):
    torch.manual_seed(0)

    def small():
        return torch.nn.Sequential(torch.nn.Linear(2, 4, bias=True), torch.nn.ReLU(),
                                   torch.nn.Linear(4, 4, bias=False), torch.nn.Softmax(dim=1))

    model = small()
    record(out, "e2e_simple_fwd", {}, lambda: model(torch.ones((2, 2))))

    def fwd_bwd(model):
        x = torch.ones((2, 2))
        targets = torch.ones((2, 4))
        y = model(x)
        loss = torch.sum((y - targets) ** 2).mean()
        loss.backward()

    model = small()
    record(out, "e2e_fwd_bwd", {}, lambda: fwd_bwd(model))

    model = small()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def fwd_bwd_step():
        fwd_bwd(model)
        sgd.step()

    fwd_bwd_step()  # momentum buffers exist before the profiled step
    record(out, "e2e_fwd_bwd_sgd", {}, fwd_bwd_step)

    for set_to_none in (True, False):
        model = small()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def two_steps(model=model, opt=opt):
            for _ in range(2):
                opt.zero_grad(set_to_none=set_to_none)
                fwd_bwd(model)
                opt.step()

        record(out, "e2e_sequential_set_to_none_%s" % str(set_to_none).lower(), {}, two_steps)

    model = torch.nn.Sequential(torch.nn.Linear(64, 128, bias=True), torch.nn.ReLU(),
                                torch.nn.Linear(128, 128, bias=False), torch.nn.Softmax(dim=1))
    adam = torch.optim.Adam(model.parameters(), lr=0.1)

    def adam_step():
        x = torch.ones((32, 64))
        targets = torch.ones((32, 128))
        y = model(x)
        loss = torch.nn.functional.mse_loss(y, targets)
        loss.backward()
        adam.step()
        adam.zero_grad()

    record(out, "e2e_adam", {}, adam_step)

    model = torch.nn.Sequential(torch.nn.Linear(2, 4), ScaleLayer())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def custom_param_step():
        opt.zero_grad()
        model(torch.ones((2, 2))).sum().backward()
        opt.step()

    record(out, "e2e_custom_param", {}, custom_param_step)

    model = small()

    def inference():
        with torch.no_grad():
            model(torch.ones((8, 2)))

    record(out, "e2e_inference", {}, inference)


def resnet(out):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(2, 3, 32, 32)
    y = torch.tensor([1, 7])

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    step()  # warm-up: momentum buffers exist
    record(out, "resnet18_sgd_step", {}, step)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="fixtures")
    ap.add_argument("--only", choices=["dataflow", "e2e", "resnet"], default=None)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    for name, fn in (("dataflow", dataflow), ("e2e", e2e), ("resnet", resnet)):
        if args.only in (None, name):
            fn(args.out)


if __name__ == "__main__":
    main()
