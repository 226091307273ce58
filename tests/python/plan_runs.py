"""Real runs for checking memtl whatif's predictions (test_whatif.py), on the
CPU: one model trained a few steps, recorded with memtl.save, once as the
run to replay and once with the change made for real.

    python tests/python/plan_runs.py --out DIR single
    python tests/python/plan_runs.py --out DIR zero --world N

`single` writes DIR/<name>.trace.jsonl.gz for each run of RUNS. `zero`
trains under DistributedDataParallel (gloo on loopback) at world size N,
once with Adam and once with ZeroRedundancyOptimizer over Adam, and writes
DIR/ddp_adam.rank<R>.trace.jsonl.gz and DIR/ddp_zero.rank<R>.trace.jsonl.gz;
the processes stop by themselves (a barrier after each run, a timeout on the
process group).
"""

import argparse
import datetime
import os
import socket
import sys

import torch
import torch.nn as nn
import torch.utils.checkpoint as checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import memtl  # noqa: E402

WIDTH = 256


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(WIDTH, 2 * WIDTH)
        self.down = nn.Linear(2 * WIDTH, WIDTH)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Net(nn.Module):
    """Four blocks and a head: eight weights of one size, so that ZeRO's
    partition is even at 2 and 4 ranks."""

    def __init__(self, use_checkpoint=False):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(4))
        self.head = nn.Linear(WIDTH, 10)
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        for b in self.blocks:
            x = checkpoint.checkpoint(b, x, use_reentrant=False) if self.use_checkpoint else b(x)
        return self.head(x)


class Encoder(nn.Module):
    """Two transformer layers (sequence 32, width 64), for a model whose
    activations are attention's."""

    def __init__(self, use_checkpoint=False):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True) for _ in range(2))
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint.checkpoint(layer, x, use_reentrant=False) if self.use_checkpoint else layer(x)
        return x


def train(path, model, opt, batch, set_to_none=True, steps=2):
    """One warm-up step, then `steps` profiled, saved to `path`."""
    inner = getattr(model, "module", model)  # under DistributedDataParallel
    x = torch.randn(batch, WIDTH) if isinstance(inner, Net) else torch.randn(batch, 32, 64)

    def step():
        opt.zero_grad(set_to_none=set_to_none)
        model(x).sum().backward()
        opt.step()

    step()
    with torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True) as prof:
        for _ in range(steps):
            step()
    memtl.save(prof, path)


def adam(model):
    return torch.optim.Adam(model.parameters())


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


# name: (model, optimizer, batch, set_to_none, checkpointed)
RUNS = {
    "adam": (Net, adam, 64, True, False),
    "sgd": (Net, sgd, 64, True, False),
    "adam_keep_grads": (Net, adam, 64, False, False),
    "adam_b1024": (Net, adam, 1024, True, False),
    "adam_b1024_checkpoint": (Net, adam, 1024, True, True),
    "encoder_adam": (Encoder, adam, 32, True, False),
    "encoder_sgd": (Encoder, sgd, 32, True, False),
    "encoder_adam_keep_grads": (Encoder, adam, 32, False, False),
    "encoder_adam_checkpoint": (Encoder, adam, 32, True, True),
}


def single(out):
    for name, (make_model, make_opt, batch, set_to_none, use_checkpoint) in RUNS.items():
        torch.manual_seed(0)
        model = make_model(use_checkpoint)
        train(os.path.join(out, name + ".trace.jsonl.gz"), model, make_opt(model), batch,
              set_to_none)


def _rank(rank, world, port, out):
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        for name in ("ddp_adam", "ddp_zero"):
            torch.manual_seed(0)
            model = nn.parallel.DistributedDataParallel(Net())
            opt = (adam(model) if name == "ddp_adam" else
                   ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam))
            train(os.path.join(out, "%s.rank%d.trace.jsonl.gz" % (name, rank)), model, opt, 64)
            dist.barrier()
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["single", "zero"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--world", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.what == "single":
        single(args.out)
    else:
        import torch.multiprocessing as mp
        mp.spawn(_rank, args=(args.world, _free_port(), args.out), nprocs=args.world)
    return 0


if __name__ == "__main__":
    sys.exit(main())
