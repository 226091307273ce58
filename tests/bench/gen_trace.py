"""Makes a big benchmark trace from a recorded real one by replicating it:

    python3 tests/bench/gen_trace.py --events 1000000 --out build/bench/t1m.trace.jsonl.gz
        [--source fixtures/resnet18_sgd_step.trace.jsonl.gz]

Each copy keeps the real structure (the same ops, shapes, allocations and
python calls) with fresh values so that copies never alias: timestamps move
past the previous copy's end, every address (TensorImpl, storage pointer,
module/optimizer self) is offset by copy << 40, record indices and parents
are renumbered. Schema records are written once, at the end. Output is
streamed (gzip, level 1: the benchmark measures memtl, not this script).
Needs no torch.
"""

import argparse
import gzip
import json
import os
import re
import sys

ADDR = re.compile(r'"(impl|ptr|self)":(\d+)')
TIME = re.compile(r'"(t0|t1|t)":(\d+)')
INDEX = re.compile(r'^\{"k":"(op|alloc|py|other)","i":(\d+),"p":(-?\d+)')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.join(os.path.dirname(__file__), "..", "..", "fixtures",
                                                     "resnet18_sgd_step.trace.jsonl.gz"))
    ap.add_argument("--events", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    with gzip.open(args.source, "rt") as f:
        lines = f.read().splitlines()
    header, body = lines[0], lines[1:]
    records = [l for l in body if not l.startswith('{"k":"schema"')]
    schemas = [l for l in body if l.startswith('{"k":"schema"')]
    for l in records:
        if not INDEX.match(l):
            sys.exit("%s: records must start with k, i, p (as memtl_torch writes them)" % args.source)
    times = [int(m.group(2)) for l in records for m in TIME.finditer(l)]
    span = max(times) - min(times) + 1000
    n = len(records)
    copies = max(1, (args.events + n - 1) // n)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
    written = 0
    with gzip.open(args.out, "wt", compresslevel=1) as out:
        out.write(header + "\n")
        for c in range(copies):
            base = c * n
            addr_off = c << 40
            time_off = c * span

            def addr(m):
                v = int(m.group(2))
                return '"%s":%d' % (m.group(1), v + addr_off if v else 0)

            def tm(m):
                return '"%s":%d' % (m.group(1), int(m.group(2)) + time_off)

            def idx(m):
                p = int(m.group(3))
                return '{"k":"%s","i":%d,"p":%d' % (m.group(1), int(m.group(2)) + base, p + base if p >= 0 else -1)

            for l in records:
                if written >= args.events:
                    break
                l = INDEX.sub(idx, l, count=1)
                l = TIME.sub(tm, l)
                out.write(ADDR.sub(addr, l) + "\n")
                written += 1
        for l in schemas:
            out.write(l + "\n")
    print("%s: %d events (%d copies of %s)" % (args.out, written, copies, os.path.basename(args.source)))


if __name__ == "__main__":
    main()
