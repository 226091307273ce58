"""memtl against PyTorch's own memory profiler on CUDA training steps.

CI has no GPU, so this is not part of CTest: it runs by hand on a machine
with one (docs/contributing.md, "On a GPU"). Each workload below is profiled on
the GPU with CPU and CUDA activities, saved with memtl.save, analyzed by the
memtl command, and compared with torch.profiler._memory_profiler on the
same profile (tests/python/torch_oracle.py): the data-flow graph, the
categorized timeline, and the .json and .raw.json.gz exports of cuda:0 and
of the CPU. The workloads take the CUDA-only paths a CPU run never does:
fused and foreach optimizers, the caching allocator, cuDNN convolutions
and batch norm, scaled-dot-product attention kernels, autocast with a
GradScaler, host-to-device copies.

    MEMTL_BIN=build/cli/memtl PYTHONPATH=python:tests/python \\
        python tests/gpu/cuda_oracle.py --out DIR

Writes DIR/results.json (per workload: equal or the first difference, the
trace's size, both sides' analysis times) and DIR/traces/NAME.trace.jsonl.gz;
exits 1 when any workload differs. Without a GPU it runs the workloads that
also run on the CPU, on the CPU (a dry run of the script itself).
"""

import argparse
import json
import os
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

import memtl
import torch_oracle

CUDA = torch.cuda.is_available()
DEV = torch.device("cuda:0" if CUDA else "cpu")

WORKLOADS = {}


def workload(cuda_only=False):
    def register(fn):
        if CUDA or not cuda_only:
            WORKLOADS[fn.__name__] = fn
        return fn
    return register


def profile():
    activities = [torch.profiler.ProfilerActivity.CPU]
    if CUDA:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=activities, record_shapes=True,
                                  profile_memory=True, with_stack=True)


def sync():
    if CUDA:
        torch.cuda.synchronize()


def mlp(width=256):
    return nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.GELU(),
                         nn.Linear(width, 10)).to(DEV)


def steps(model, opt, make_batch, n=2, warm=1, scaler=None, amp=None):
    """`warm` unprofiled steps (optimizer state exists), then `n` profiled."""
    def step():
        x, y = make_batch()
        opt.zero_grad(set_to_none=True)
        if amp is not None:
            with torch.autocast(DEV.type, dtype=amp):
                loss = F.cross_entropy(model(x), y)
        else:
            loss = F.cross_entropy(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    for _ in range(warm):
        step()
    sync()
    with profile() as prof:
        for _ in range(n):
            step()
        sync()
    return prof


def batch(n=32, features=64, classes=10, on_host=False):
    def make():
        x = torch.randn(n, features, device="cpu" if on_host else DEV)
        y = torch.randint(0, classes, (n,), device="cpu" if on_host else DEV)
        if on_host:  # a data loader's host batch, copied to the GPU
            x, y = x.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True)
        return x, y
    return make


@workload()
def mlp_sgd_momentum():
    model = mlp()
    return steps(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), batch())


@workload()
def mlp_adam_foreach():
    model = mlp()
    return steps(model, torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True), batch())


@workload()
def mlp_adam_first_step():
    """Adam's state is created inside the profiled window."""
    model = mlp()
    return steps(model, torch.optim.Adam(model.parameters(), lr=1e-3), batch(), n=1, warm=0)


@workload(cuda_only=True)
def mlp_adamw_fused():
    model = mlp()
    return steps(model, torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True), batch())


@workload()
def host_batches_to_gpu():
    model = mlp()
    return steps(model, torch.optim.SGD(model.parameters(), lr=0.1), batch(on_host=True))


def convnet():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)).to(DEV)


def images(n=16):
    def make():
        return torch.randn(n, 3, 32, 32, device=DEV), torch.randint(0, 10, (n,), device=DEV)
    return make


@workload()
def convnet_bn_sgd():
    model = convnet()
    return steps(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), images())


@workload(cuda_only=True)
def convnet_amp_fp16_scaler():
    model = convnet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return steps(model, opt, images(), scaler=torch.amp.GradScaler("cuda"), amp=torch.float16)


@workload()
def convnet_channels_last():
    model = convnet().to(memory_format=torch.channels_last)
    make = images()

    def make_cl():
        x, y = make()
        return x.to(memory_format=torch.channels_last), y
    return steps(model, torch.optim.SGD(model.parameters(), lr=0.1), make_cl)


class Classifier(nn.Module):
    def __init__(self, d=64, heads=4, layers=2, classes=10):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


def sequences(n=8, length=32, d=64):
    def make():
        return torch.randn(n, length, d, device=DEV), torch.randint(0, 10, (n,), device=DEV)
    return make


@workload()
def transformer_adamw():
    model = Classifier().to(DEV)
    return steps(model, torch.optim.AdamW(model.parameters(), lr=1e-3), sequences())


@workload(cuda_only=True)
def transformer_bf16_autocast():
    model = Classifier().to(DEV)
    return steps(model, torch.optim.AdamW(model.parameters(), lr=1e-3), sequences(),
                 amp=torch.bfloat16)


@workload(cuda_only=True)
def transformer_6_layers_3_steps():
    """A larger trace (tens of thousands of events): parity and both sides' times at scale."""
    model = Classifier(d=256, heads=8, layers=6).to(DEV)
    return steps(model, torch.optim.AdamW(model.parameters(), lr=1e-3), sequences(n=8, length=128, d=256),
                 n=3)


@workload()
def sdpa_attention():
    """F.scaled_dot_product_attention picks flash or memory-efficient kernels on the GPU."""
    proj = nn.Linear(64, 3 * 64).to(DEV)
    out = nn.Linear(64, 64).to(DEV)
    opt = torch.optim.SGD(list(proj.parameters()) + list(out.parameters()), lr=0.1)
    dtype = torch.float16 if CUDA else torch.float32
    proj, out = proj.to(dtype), out.to(dtype)
    x = torch.randn(4, 128, 64, device=DEV, dtype=dtype)
    with profile() as prof:
        q, k, v = proj(x).view(4, 128, 3, 4, 16).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out(y.transpose(1, 2).reshape(4, 128, 64)).float().pow(2).mean().backward()
        opt.step()
        sync()
    return prof


@workload()
def checkpointed_blocks():
    from torch.utils.checkpoint import checkpoint
    blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
                           for _ in range(3)).to(DEV)
    opt = torch.optim.SGD(blocks.parameters(), lr=0.1)
    x = torch.randn(32, 64, device=DEV)
    with profile() as prof:
        h = x
        for b in blocks:
            h = h + checkpoint(b, h, use_reentrant=False)
        h.pow(2).mean().backward()
        opt.step()
        sync()
    return prof


@workload()
def inference_no_grad():
    model = convnet().eval()
    with profile() as prof:
        with torch.inference_mode():
            for _ in range(2):
                model(torch.randn(16, 3, 32, 32, device=DEV))
        sync()
    return prof


def run(name, fn, out_dir):
    torch.manual_seed(0)
    entry = {"name": name, "device": str(DEV)}
    t0 = time.perf_counter()
    prof = fn()
    entry["profile_s"] = round(time.perf_counter() - t0, 3)
    # The CPU too where the run allocated there (memtl refuses a device the
    # trace has no allocation on, where PyTorch exports an empty timeline).
    seen = torch_oracle._allocation_devices(torch_oracle.memory_profile(prof))
    devices = [str(DEV)] + (["cpu"] if CUDA and "cpu" in seen else [])
    entry["devices"] = {}
    for device in devices:
        t0 = time.perf_counter()
        expected = torch_oracle.torch_artifacts(prof, device)
        torch_s = time.perf_counter() - t0
        trace = os.path.join(out_dir, "traces", name + ".trace.jsonl.gz")
        memtl.save(prof, trace)
        work = os.path.join(out_dir, "work", name)
        os.makedirs(work, exist_ok=True)
        t0 = time.perf_counter()
        actual = torch_oracle.memtl_artifacts(trace, work, device)
        memtl_s = time.perf_counter() - t0
        differences = []
        for artifact in ("graph", "categories"):
            if actual[artifact] != expected[artifact]:
                differences.append([artifact, torch_oracle._text_difference(actual[artifact],
                                                                          expected[artifact])])
        for artifact in ("json", "raw"):
            if actual[artifact] != expected[artifact]:
                differences.append([artifact, torch_oracle._export_difference(
                    artifact, actual[artifact], expected[artifact])])
        rows = len(expected["raw"])
        entry["devices"][device] = {"equal": not differences, "differences": differences,
                                    "raw_rows": rows, "torch_s": round(torch_s, 3),
                                    "memtl_s": round(memtl_s, 3)}
        entry["trace_bytes"] = os.path.getsize(trace)
    return entry


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="*", help="workload names (default: all)")
    args = p.parse_args()
    os.makedirs(os.path.join(args.out, "traces"), exist_ok=True)
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0) if CUDA else None,
            "memtl": memtl.__version__, "workloads": []}
    failed = 0
    for name in args.only or sorted(WORKLOADS):
        try:
            entry = run(name, WORKLOADS[name], args.out)
        except Exception:  # noqa: BLE001 - one workload's failure is reported, the rest run
            entry = {"name": name, "error": traceback.format_exc()}
        ok = "error" not in entry and all(d["equal"] for d in entry["devices"].values())
        failed += not ok
        line = "%-28s %s" % (name, "equal" if ok else "DIFFERS")
        if "devices" in entry:
            line += "  " + "  ".join("%s: %d rows, torch %.2fs, memtl %.2fs" % (
                d, v["raw_rows"], v["torch_s"], v["memtl_s"]) for d, v in entry["devices"].items())
        print(line, flush=True)
        if not ok:
            print(entry.get("error") or json.dumps(entry["devices"], indent=1)[:3000], flush=True)
        info["workloads"].append(entry)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(info, f, indent=1)
    print("%d of %d workloads equal (torch %s, %s)" % (
        len(info["workloads"]) - failed, len(info["workloads"]), torch.__version__, info["gpu"] or "CPU"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
