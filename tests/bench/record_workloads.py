"""Records real training workloads as memtl traces with Debian's torch (CPU).

    /usr/bin/python3 tests/bench/record_workloads.py [--out build/bench/] [--steps 3]

Workloads (each: one warm-up step outside the profiler, so that optimizer
state exists, then --steps steps inside one profile with record_shapes,
profile_memory and with_stack, as memtl_torch expects; one intra-op thread):

- transformer_adam: nn.TransformerEncoder (d_model 64, 4 heads, feed-forward
  128, 2 layers) on 4 sequences of 16 tokens (embedding in, linear head out),
  cross entropy, Adam;
- resnet18_sgd: torchvision resnet18 (10 classes) at 4x3x32x32, cross entropy,
  SGD with momentum.

Writes OUT/NAME_Nsteps.trace.jsonl.gz; any of them is a --source for
tests/bench/gen_trace.py. Takes about 15 s on 2 cores.
"""

import argparse
import gzip
import os
import sys
import time

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the source tree's package
from memtl import _recorder as recorder  # noqa: E402


def transformer_adam(optimizer=None):
    vocab, d_model, seq, batch = 100, 64, 16, 4

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, d_model)
            layer = torch.nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, dropout=0.1,
                                                     batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2)
            self.head = torch.nn.Linear(d_model, vocab)

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens)))

    model = Model()
    opt = (optimizer or torch.optim.Adam)(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, vocab, (batch, seq))
    targets = torch.randint(0, vocab, (batch, seq))

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        opt.step()

    return step


def resnet18_sgd(image_size=32):
    import torchvision

    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(4, 3, image_size, image_size)
    y = torch.randint(0, 10, (4,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


WORKLOADS = {"transformer_adam": transformer_adam, "resnet18_sgd": resnet18_sgd}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("workloads", nargs="*", help="which to record: %s (default: all)" % ", ".join(WORKLOADS))
    args = ap.parse_args()
    for name in args.workloads:
        if name not in WORKLOADS:
            ap.error("unknown workload %r" % name)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # deterministic op structure, and the machine may be small
    os.makedirs(args.out, exist_ok=True)
    for name in args.workloads or sorted(WORKLOADS):
        start = time.monotonic()
        step = WORKLOADS[name]()
        step()  # warm-up: optimizer state exists before profiling, as in a long run
        with torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True) as prof:
            for _ in range(args.steps):
                step()
        path = os.path.join(args.out, "%s_%dsteps.trace.jsonl.gz" % (name, args.steps))
        recorder.save(prof, path)
        with gzip.open(path, "rt") as f:
            next(f)
            events = sum(1 for line in f if not line.startswith('{"k":"schema"'))
        print("%-60s %7d events %9d bytes %5.1f s" % (path, events, os.path.getsize(path),
                                                    time.monotonic() - start))


if __name__ == "__main__":
    main()
