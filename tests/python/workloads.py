"""Small CPU workloads for the oracle tests (test_oracle.py).

WORKLOADS maps a name to a function returning a finished profile, recorded
with the settings PyTorch's memory profiler needs. Each is seeded, runs in
well under a second on two cores, and exercises a rule of the memory
profiler that the fixtures do not (optimizers, recurrent and attention
layers, `out=` variants, inference mode, undefined gradients...).

SCENARIOS adds the fixture scenarios of collect/torch/record_fixtures.py,
profiled here with whatever torch runs the tests.
"""

import importlib.util
import os
import sys
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "collect", "torch"))
import record_fixtures  # noqa: E402

SCENARIOS = {s.name: s for s in record_fixtures.SCENARIOS}

WORKLOADS = {}


def workload(fn):
    """Registers fn under its name; the seed is set here so that every
    workload is deterministic on its own, whatever ran before it."""
    def seeded():
        torch.manual_seed(0)
        return fn()
    seeded.__name__ = fn.__name__
    seeded.__doc__ = fn.__doc__
    WORKLOADS[fn.__name__] = seeded
    return seeded


def profile():
    return torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True)


def _mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _train_step(model, opt, x, y, set_to_none=True):
    opt.zero_grad(set_to_none=set_to_none)
    F.mse_loss(model(x), y).backward()
    opt.step()


def _optimizer_workload(make_opt, warm=True):
    """One profiled MLP step; `warm` runs a step first so that the optimizer
    state exists (updated in place rather than created)."""
    model = _mlp()
    opt = make_opt(model.parameters())
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    if warm:
        _train_step(model, opt, x, y)
    with profile() as prof:
        _train_step(model, opt, x, y)
    return prof


# ---- optimizers --------------------------------------------------------------

@workload
def sgd_momentum():
    return _optimizer_workload(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9))


@workload
def adam():
    return _optimizer_workload(lambda p: torch.optim.Adam(p, lr=0.01))


@workload
def adam_first_step():
    """Adam's state (exp_avg, exp_avg_sq, step) is created inside the window."""
    return _optimizer_workload(lambda p: torch.optim.Adam(p, lr=0.01), warm=False)


@workload
def adamw_foreach():
    return _optimizer_workload(lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True))


@workload
def adamw_for_loop():
    return _optimizer_workload(lambda p: torch.optim.AdamW(p, lr=0.01, foreach=False))


def _zero_grad_workload(set_to_none):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    _train_step(model, opt, x, y)  # .grad exists before the window
    with profile() as prof:
        _train_step(model, opt, x, y, set_to_none=set_to_none)
    return prof


@workload
def zero_grad_set_to_none_false():
    """Gradients are zeroed in place and accumulated into (aten::add_)."""
    return _zero_grad_workload(False)


@workload
def zero_grad_set_to_none_true():
    return _zero_grad_workload(True)


@workload
def grad_accumulation():
    """Two micro-batches per step: the second AccumulateGrad adds in place."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xs, ys = torch.randn(2, 4, 8), torch.randn(2, 4, 4)
    with profile() as prof:
        opt.zero_grad()
        for i in range(2):
            (F.mse_loss(model(xs[i]), ys[i]) / 2).backward()
        opt.step()
    return prof


@workload
def several_steps():
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    with profile() as prof:
        for _ in range(3):
            _train_step(model, opt, x, y)
    return prof


@workload
def teacher_student():
    """Distillation: the teacher runs under no_grad, its output is detached
    again, only the student learns."""
    teacher, student = _mlp(), _mlp()
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    with profile() as prof:
        with torch.no_grad():
            target = teacher(x)
        loss = F.mse_loss(student(x), target.detach())
        loss.backward()
        opt.step()
        opt.zero_grad()
    return prof


# ---- layers ----------------------------------------------------------------------

def _recurrent(cell):
    model = cell(input_size=4, hidden_size=8, batch_first=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 5, 4)
    with profile() as prof:
        out, _ = model(x)
        out.sum().backward()
        opt.step()
    return prof


@workload
def lstm():
    return _recurrent(nn.LSTM)


@workload
def gru():
    return _recurrent(nn.GRU)


@workload
def transformer():
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
    opt = torch.optim.Adam(layer.parameters(), lr=0.01)
    x = torch.randn(2, 6, 16)
    with profile() as prof:
        layer(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    return prof


@workload
def hand_written_attention():
    q_proj, k_proj, v_proj = (nn.Linear(16, 16) for _ in range(3))
    norm = nn.LayerNorm(16)
    params = [p for m in (q_proj, k_proj, v_proj, norm) for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.1)
    x = torch.randn(2, 6, 16)
    with profile() as prof:
        h = norm(x)
        q, k, v = q_proj(h), k_proj(h), v_proj(h)
        attn = torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1)
        (x + attn @ v).sum().backward()
        opt.step()
    return prof


@workload
def layernorm_frozen_affine():
    """Only the input needs a gradient: NativeLayerNormBackward0 produces
    undefined gradients for the frozen weight and bias."""
    norm = nn.LayerNorm(8)
    norm.requires_grad_(False)
    x = torch.randn(4, 8, requires_grad=True)
    with profile() as prof:
        norm(x).sum().backward()
    return prof


class _Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x


@workload
def custom_autograd_function():
    w = torch.randn(8, requires_grad=True)
    x = torch.randn(4, 8)
    with profile() as prof:
        _Cube.apply(x * w).sum().backward()
    return prof


@workload
def depthwise_conv():
    model = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(), nn.Conv2d(8, 4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 8, 8, 8)
    with profile() as prof:
        model(x).mean().backward()
        opt.step()
    return prof


# ---- op variants ----------------------------------------------------------------

@workload
def out_variants():
    """`out=` into an empty tensor (resized by the op), into a preallocated
    one, and abs, whose out= path creates a 0-element result first."""
    a, b = torch.randn(16), torch.randn(16)
    with profile() as prof:
        r1 = torch.abs(a, out=torch.empty(0))
        r2 = torch.add(a, b, out=torch.empty(0))
        r3 = torch.mul(a, b, out=torch.empty_like(a))
        r4 = torch.sum(a.view(4, 4), dim=0, out=torch.empty(0))
        del r1, r2, r3, r4
    return prof


@workload
def abs_out_empty():
    """The smallest `out=` case: torch.abs into torch.empty(0)."""
    x = torch.randn(8)
    with profile() as prof:
        torch.abs(x, out=torch.empty(0))
    return prof


@workload
def inplace_in_record_function():
    x, y = torch.randn(16), torch.randn(16)
    with profile() as prof:
        with torch.profiler.record_function("my_block"):
            x.mul_(2).add_(y)
            y.relu_()
            z = torch.zeros(16)
            z.copy_(x)
    return prof


@workload
def inference_mode():
    model = _mlp()
    x = torch.randn(4, 8)
    with profile() as prof:
        with torch.inference_mode():
            model(x).softmax(dim=1)
    return prof


# ---- more rules: tensor lists, views, second-order gradients ---------------------

@workload
def sgd_foreach_clip_grad():
    """Tensor-list ops (_foreach_*, clip_grad_norm_'s norms) in and after backward."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    _train_step(model, opt, x, y)
    with profile() as prof:
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return prof


@workload
def cat_stack_split():
    """Tensor[] inputs (cat, stack) and multi-output views (split, unbind)."""
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(4, 4)
    with profile() as prof:
        parts = torch.split(x @ w, 2, dim=0)
        y = torch.cat([parts[1], parts[0]], dim=1)
        z = torch.stack(list(y.unbind(0)), dim=1)
        torch.cat([z.flatten(), torch.empty(0)]).sum().backward()
    return prof


@workload
def inplace_on_views():
    """In-place writes through views and indexing (the base's version bumps)."""
    x = torch.zeros(4, 4)
    w = torch.randn(4, requires_grad=True)
    with profile() as prof:
        x[0].add_(1)
        x[:, 1].mul_(2)
        x[x > 0] = 3.0
        y = x.clone()
        y[1] = w * 2
        y.sum().backward()
    return prof


@workload
def manual_sgd_no_grad():
    """The optimizer written by hand: updates under no_grad, grads cleared."""
    w = torch.randn(8, 4, requires_grad=True)
    x = torch.randn(3, 8)
    with profile() as prof:
        for _ in range(2):
            (x @ w).pow(2).sum().backward()
            with torch.no_grad():
                w -= 0.1 * w.grad
            w.grad = None
    return prof


@workload
def double_backward():
    """A gradient penalty: autograd.grad with create_graph, then backward."""
    w = torch.randn(4, requires_grad=True)
    x = torch.randn(3, 4)
    with profile() as prof:
        y = (x * w).tanh().sum()
        (g,) = torch.autograd.grad(y, w, create_graph=True)
        (y + g.pow(2).sum()).backward()
    return prof


@workload
def checkpointed():
    """Activation checkpointing: the forward reruns inside backward."""
    from torch.utils.checkpoint import checkpoint

    model = _mlp()
    x = torch.randn(4, 8, requires_grad=True)
    with profile() as prof:
        checkpoint(model, x, use_reentrant=False).sum().backward()
    return prof


@workload
def dropout_embedding():
    """RNG ops writing in place (bernoulli_), embedding's index input and its
    backward (embedding_dense_backward), and LayerNorm without affine (None
    for Optional[Tensor] weight and bias)."""
    emb = nn.Embedding(10, 8)
    norm = nn.LayerNorm(8, elementwise_affine=False)
    opt = torch.optim.Adam(emb.parameters(), lr=0.01)
    idx = torch.tensor([[1, 2, 3], [4, 5, 1]])
    with profile() as prof:
        F.dropout(norm(emb(idx)), p=0.5, training=True).sum().backward()
        opt.step()
    return prof


@workload
def retain_graph_twice():
    """Two backward passes over one graph: the second accumulates in place."""
    w = torch.randn(4, requires_grad=True)
    x = torch.randn(4)
    with profile() as prof:
        y = (x * w).exp().sum()
        y.backward(retain_graph=True)
        y.backward()
    return prof


@workload
def autocast_bfloat16():
    """CPU autocast: casts to bfloat16 and back around the matmuls."""
    model = _mlp()
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    with profile() as prof:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        F.mse_loss(out.float(), y).backward()
    return prof


@workload
def storage_swaps():
    """One TensorImpl seen with two storages (PyTorch merges their ids):
    out= into a tensor whose storage is too small, resize_ that grows, set_ onto another
    tensor's storage."""
    a, b = torch.randn(16), torch.randn(16)
    with profile() as prof:
        small = torch.empty(2)
        small.resize_(0)  # keeps its storage; the out= below must grow it
        torch.add(a, b, out=small)
        small.mul_(2)
        x = torch.zeros(4)
        x.resize_(64)
        x.fill_(1.0)
        y = torch.ones(8)
        x.set_(y)
        x.add_(1)
        del small, x, y
    return prof


@workload
def shared_module_twice():
    """One module called twice per step, and two optimizer param groups."""
    shared, head = nn.Linear(8, 8), nn.Linear(8, 4)
    opt = torch.optim.SGD([{"params": shared.parameters()}, {"params": head.parameters(), "lr": 0.01}],
                          lr=0.1, momentum=0.9)
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    with profile() as prof:
        for _ in range(2):
            opt.zero_grad()
            F.mse_loss(head(torch.relu(shared(torch.relu(shared(x))))), y).backward()
            opt.step()
    return prof


@workload
def mobilenet_v3_small():
    """torchvision's MobileNetV3-small (depthwise convolutions, hardswish,
    squeeze-excitation), one SGD-momentum step after a warm one; needs
    torchvision (the newest-torch oracle run installs it; skipped elsewhere)."""
    if importlib.util.find_spec("torchvision") is None:
        raise unittest.SkipTest("needs torchvision")
    import torchvision

    model = torchvision.models.mobilenet_v3_small(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 7])

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    step()
    with profile() as prof:
        step()
    return prof
