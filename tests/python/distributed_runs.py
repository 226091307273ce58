"""Real multi-process training on the CPU (gloo on loopback), each rank
profiled and saved with memtl.save, then checked against PyTorch's own memory
profiler on that rank's profile (torch_oracle.py): memtl's answer must equal
PyTorch's wherever PyTorch gives one; where PyTorch raises, memtl must still
give the whole analysis.

    python tests/python/distributed_runs.py --world 2 --out DIR [--scenario NAME ...]

writes DIR/rank<R>.json ({scenario: outcome}) and
DIR/<scenario>.rank<R>.trace.jsonl.gz. An outcome is "equal", "torch raised:
<error>; memtl answered", or what went wrong. test_distributed.py runs it
with a time limit; the processes stop by themselves.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "python"), HERE]

import memtl  # noqa: E402
import torch_oracle  # noqa: E402


def _profile():
    return torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True)


def _encoder():
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


def _mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def _steps(model, opt, x, warm, profiled):
    """`warm` unprofiled steps, then `profiled` steps under the profiler."""
    def step():
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()

    for _ in range(warm):
        step()
    with _profile() as prof:
        for _ in range(profiled):
            step()
    return prof


def ddp_default(rank):
    model = nn.parallel.DistributedDataParallel(_encoder())
    return _steps(model, torch.optim.AdamW(model.parameters()), torch.randn(8, 4, 32), 1, 1)


def ddp_bucket_view(rank):
    model = nn.parallel.DistributedDataParallel(_encoder(), gradient_as_bucket_view=True)
    return _steps(model, torch.optim.AdamW(model.parameters()), torch.randn(8, 4, 32), 1, 1)


def ddp_static_graph(rank):
    # Two profiled steps after a warm-up: the reducer frees a gradient bucket
    # allocated before the profile, whose address the second step reuses
    # (PyTorch: "version mismatch"; docs/categories.md).
    model = nn.parallel.DistributedDataParallel(_encoder(), static_graph=True)
    return _steps(model, torch.optim.AdamW(model.parameters()), torch.randn(8, 4, 32), 1, 2)


def zero_adam(rank):
    from torch.distributed.optim import ZeroRedundancyOptimizer

    model = nn.parallel.DistributedDataParallel(_mlp())
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
    return _steps(model, opt, torch.randn(8, 16), 1, 1)


def fsdp2(rank):
    from torch.distributed.fsdp import fully_shard

    model = _mlp()
    fully_shard(model[0])
    fully_shard(model)
    return _steps(model, torch.optim.Adam(model.parameters()), torch.randn(8, 16), 1, 1)


def ddp_compiled(rank):
    model = nn.parallel.DistributedDataParallel(torch.compile(_mlp()))
    return _steps(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(8, 16), 1, 1)


SCENARIOS = {f.__name__: f for f in (ddp_default, ddp_bucket_view, ddp_static_graph, zero_adam,
                                     fsdp2, ddp_compiled)}


def _check(prof, trace):
    """The outcome of one rank's profile: PyTorch's answer compared with
    memtl's, or, where PyTorch raises, whether memtl gives every output."""
    try:
        torch_oracle.torch_artifacts(prof, "cpu")
    except Exception as e:  # PyTorch's own profiler failed: memtl must not
        torch_error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:120])
        memtl.save(prof, trace)
        for args in (["export", trace, "-o", trace + ".html", "-o", trace + ".json"],
                     ["graph", trace], ["categories", trace], ["peak", trace],
                     ["events", trace], ["summary", trace]):
            r = subprocess.run([memtl.binary()] + args, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                return "torch raised %s; memtl %s failed: %s" % (torch_error, args[0], r.stderr.strip())
        return "torch raised: %s; memtl answered" % torch_error
    result = torch_oracle.compare(prof)
    memtl.save(prof, trace)
    return "equal" if result.equal else "differs: " + result.report()[:2000]


def _rank(rank, world, port, out, names):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    outcomes = {}
    try:
        for name in names:
            torch.manual_seed(0)
            try:
                prof = SCENARIOS[name](rank)
                trace = os.path.join(out, "%s.rank%d.trace.jsonl.gz" % (name, rank))
                outcomes[name] = _check(prof, trace)
            except Exception:
                outcomes[name] = "error: " + traceback.format_exc()[-1500:]
            dist.barrier()
    finally:
        with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
            json.dump(outcomes, f, indent=1)
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), default=[])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    names = args.scenario or list(SCENARIOS)
    mp.spawn(_rank, args=(args.world, _free_port(), args.out, names), nprocs=args.world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
