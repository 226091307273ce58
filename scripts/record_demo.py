"""Records the demo's trace, docs/transformer_adamw_3steps.trace.jsonl.gz
(scripts/demo.sh, the README's picture docs/report.png; issue 35): a small
decoder-style transformer language model trained for three AdamW steps on
the CPU, with torch 2.13.0 from .venv (scripts/venv.sh):

    PYTHONPATH=python MEMTL_BIN=build/cli/memtl MEMTL_TORCH_NATIVE=0 \\
        .venv/bin/python scripts/record_demo.py [--out PATH]

The model: token embedding + learned positions, 2 nn.TransformerEncoderLayer
blocks (d_model 256, 4 heads, feed-forward 1024, dropout 0.1, batch_first,
norm_first) under a causal mask, a final LayerNorm and a vocabulary head
(4096 tokens): 3.7M parameters, at batch 8 x 128 tokens with cross-entropy
on the next token. The three steps (zero_grad(set_to_none=True), forward,
backward, a fused AdamW step) run in
one torch.profiler.profile whose schedule marks them ProfilerStep#0..2, so
the report draws each step's line. The sizes make the activations a large
share of the peak (they rise in each forward and fall in each backward)
while the trace stays small. The trace is written at gzip level 9.
scripts/screenshot_report.py then makes docs/report.png from it.

Re-recording gives other addresses and times, so the bytes differ; the
categories and the peak's size do not. It is kept out of fixtures/, whose
every trace the unit tests check (against goldens, among others). Now and
then torch 2.13's python tracer gives a name that is not UTF-8 and
memtl.save raises UnicodeDecodeError (tests/python/test_report_browser.py);
run it again.
"""

import argparse
import gzip
import os
import shutil
import sys
import tempfile

import torch

import memtl

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DEFAULT_OUT = os.path.join(ROOT, "docs", "transformer_adamw_3steps.trace.jsonl.gz")

VOCAB, D_MODEL, HEADS, FFN, LAYERS = 4096, 256, 4, 1024, 2
BATCH, SEQ, STEPS = 8, 128, 3


class TinyLM(torch.nn.Module):
    """A decoder-only language model built from encoder layers and a causal mask."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, D_MODEL)
        self.pos = torch.nn.Parameter(torch.zeros(SEQ, D_MODEL))
        self.blocks = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, FFN, dropout=0.1, batch_first=True,
                                             norm_first=True)
            for _ in range(LAYERS))
        self.norm = torch.nn.LayerNorm(D_MODEL)
        self.head = torch.nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens, mask):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.head(self.norm(x))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="the trace (default: %(default)s)")
    args = parser.parse_args()

    # One thread: with two, a busy machine stretched the optimizer steps and
    # the gaps between ops eightfold, and the report's picture with them.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = TinyLM()
    # fused=True: one kernel updates every parameter. The default on the CPU
    # (a loop of about ten ops per parameter; foreach=True falls back to it
    # on the CPU) would make the trace twice as long for the same memory.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(SEQ)
    data = torch.randint(0, VOCAB, (STEPS, BATCH, SEQ + 1))
    schedule = torch.profiler.schedule(wait=0, warmup=0, active=STEPS, repeat=1)
    with torch.profiler.profile(schedule=schedule, record_shapes=True, profile_memory=True,
                                with_stack=True) as prof:
        for step in range(STEPS):
            tokens, targets = data[step, :, :-1], data[step, :, 1:]
            opt.zero_grad(set_to_none=True)
            # The logits are not kept beyond the loss (autograd keeps what
            # it needs), so the activations fall to nothing in each backward.
            loss = torch.nn.functional.cross_entropy(model(tokens, mask).flatten(0, 1), targets.flatten())
            loss.backward()
            opt.step()
            prof.step()

    # memtl.save writes gzip level 2; the fixture is kept at level 9.
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "demo.trace.jsonl.gz")
        memtl.save(prof, saved, model=model)
        with gzip.open(saved, "rb") as src, open(args.out + ".tmp", "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    os.replace(args.out + ".tmp", args.out)
    print("wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)), file=sys.stderr)


if __name__ == "__main__":
    main()
