"""Makes a big benchmark trace by replicating a recorded real one.

    python3 tests/bench/gen_trace.py --events 1000000 [--out build/bench/t1000000.trace.jsonl.gz]
        [--source fixtures/resnet18_sgd_step.trace.jsonl.gz] [--level 6]

The output is the source's header, then copies of the source's event records
until --events records are written (the last copy may be cut short: a prefix
of a pre-order stream is still a valid trace), then the source's `schema`
records once. Each copy keeps the real structure (the same ops, shapes,
allocations and python calls) with fresh values so that copies never alias:

- `i` and `p` are renumbered (p = -1 stays -1);
- `t0`, `t1`, `t` move past the previous copy's end;
- every address (`impl` and `ptr` of full and partial tensors, `ptr` of
  allocations, module/optimizer `self`) is offset by copy * 2^k, where 2^k is
  above every address in the source, so copies use disjoint ranges; 0 stays 0;
- producer ids (`id`, `aid`) and autograd `seq` are offset when present
  (null and -1 stay as they are: torch 1.13 traces have no ids).

Each source record is parsed once (json) into a %-format template with one
slot per rewritten value; a copy is then one `%` formatting of a whole copy's
template, so the rewriting never touches string contents. The output is
streamed (one copy in memory at a time). Needs no torch; the default source is
the committed resnet18 fixture. Compression level 6 by default (--level);
python/memtl/_recorder.py writes level 2.
"""

import argparse
import gzip
import json
import os
import re
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_SOURCE = os.path.join(ROOT, "fixtures", "resnet18_sgd_step.trace.jsonl.gz")
MARK = "@@memtl-gen-slot@@"
SLOT = re.compile('"%s(\\d+)"' % MARK)
INT64_MAX = (1 << 63) - 1

# slot kinds; each copy c adds offsets[kind] to the slot's source value
CONST, INDEX, TIME, ADDR, SEQ, ID, AID = range(7)


def read_lines(path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8").splitlines()


class Template:
    """One source record as a %-format string plus its slots (kind, value)."""

    def __init__(self, line, lineno, path):
        if MARK in line:
            sys.exit("%s: line %d contains the generator's marker" % (path, lineno))
        obj = json.loads(line)
        self.slots = []
        if not isinstance(obj, dict) or obj.get("k") not in ("op", "alloc", "py", "other"):
            sys.exit("%s: line %d: expected an event record" % (path, lineno))
        for key in ("i", "p"):
            if not isinstance(obj.get(key), int):
                sys.exit("%s: line %d: missing integer %r" % (path, lineno, key))
        self.index = obj["i"]
        obj["i"] = self.slot(INDEX, obj["i"])
        obj["p"] = self.slot(CONST if obj["p"] < 0 else INDEX, obj["p"])
        for key in ("t0", "t1", "t"):
            if isinstance(obj.get(key), int):
                obj[key] = self.slot(TIME, obj[key])
        if isinstance(obj.get("seq"), int) and obj["seq"] >= 0:
            obj["seq"] = self.slot(SEQ, obj["seq"])
        for key in ("args", "module", "optimizer"):
            if key in obj:
                self.walk(obj[key])
        if obj["k"] == "alloc":
            self.walk(obj)  # ptr, id, aid of the allocation itself
        # slots were made in walk order; put them in text order
        text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
        parts = SLOT.split(text.replace("%", "%%"))
        order = [int(x) for x in parts[1::2]]
        if sorted(order) != list(range(len(self.slots))):
            sys.exit("%s: line %d: could not template the record" % (path, lineno))
        self.slots = [self.slots[j] for j in order]
        self.fmt = "%d".join(parts[0::2])

    def slot(self, kind, value):
        self.slots.append((kind, value))
        return "%s%d" % (MARK, len(self.slots) - 1)

    def walk(self, node):
        """Rewrites addresses and ids anywhere inside args/module/optimizer."""
        stack = [node]
        while stack:
            x = stack.pop()
            if isinstance(x, list):
                stack.extend(x)
                continue
            if not isinstance(x, dict):
                continue
            for key, v in x.items():
                if isinstance(v, (dict, list)):
                    stack.append(v)
                elif isinstance(v, bool) or not isinstance(v, int):
                    continue
                elif key in ("impl", "ptr", "self"):
                    if v < 0:
                        sys.exit("negative address %d" % v)
                    x[key] = self.slot(ADDR if v else CONST, v)
                elif key == "id":
                    x[key] = self.slot(ID, v)
                elif key == "aid":
                    x[key] = self.slot(AID, v)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=DEFAULT_SOURCE, help="recorded trace (plain or gzip)")
    ap.add_argument("--events", type=int, required=True, help="number of event records to write")
    ap.add_argument("--out", help="output .trace.jsonl.gz (default build/bench/tEVENTS.trace.jsonl.gz)")
    ap.add_argument("--level", type=int, default=6, help="gzip level (default 6; memtl_torch writes 2)")
    args = ap.parse_args()
    if args.events < 1:
        sys.exit("--events must be positive")
    out_path = args.out or os.path.join(ROOT, "build", "bench", "t%d.trace.jsonl.gz" % args.events)
    start = time.monotonic()

    lines = read_lines(args.source)
    header = json.loads(lines[0])
    if header.get("format") != "memtl-trace":
        sys.exit("%s: not a memtl trace" % args.source)
    templates, schemas = [], []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if line.startswith('{"k":"schema"') or json.loads(line).get("k") == "schema":
            schemas.append(line)
        else:
            templates.append(Template(line, n, args.source))
    if not templates:
        sys.exit("%s: no event records" % args.source)

    # per-kind strides: every copy's values lie past the previous copy's
    def values(kind):
        return [v for t in templates for k, v in t.slots if k == kind]

    times = values(TIME)
    index_stride = max(t.index for t in templates) + 1
    time_stride = (max(times) - min(times) + 1000) if times else 0
    addr_stride = 1 << max(v for v in values(ADDR) + [1]).bit_length()
    seq_stride = max(values(SEQ) + [-1]) + 1
    id_stride = max(values(ID) + [-1]) + 1
    aid_stride = max(values(AID) + [-1]) + 1

    n = len(templates)
    copies = (args.events + n - 1) // n
    c = copies - 1
    for kind, stride in ((INDEX, index_stride), (TIME, time_stride), (ADDR, addr_stride), (SEQ, seq_stride),
                         (ID, id_stride), (AID, aid_stride)):
        vs = values(kind)
        if vs and max(vs) + c * stride > INT64_MAX:
            sys.exit("%d copies overflow int64 (slot kind %d); use fewer events" % (copies, kind))

    kinds = [k for t in templates for k, _ in t.slots]
    bases = [v for t in templates for _, v in t.slots]
    copy_fmt = "\n".join(t.fmt for t in templates) + "\n"

    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    tmp = out_path + ".tmp"
    written = 0
    with gzip.open(tmp, "wb", compresslevel=args.level) as out:
        out.write((lines[0] + "\n").encode("utf-8"))
        for c in range(copies):
            offsets = (0, c * index_stride, c * time_stride, c * addr_stride, c * seq_stride, c * id_stride,
                       c * aid_stride)
            vals = tuple([b + offsets[k] for b, k in zip(bases, kinds)])
            left = args.events - written
            if left >= n:
                out.write((copy_fmt % vals).encode("utf-8"))
                written += n
            else:  # a prefix of the last copy
                nslots = sum(len(t.slots) for t in templates[:left])
                fmt = "\n".join(t.fmt for t in templates[:left]) + "\n"
                out.write((fmt % vals[:nslots]).encode("utf-8"))
                written += left
        for line in schemas:
            out.write((line + "\n").encode("utf-8"))
    os.replace(tmp, out_path)
    print("%s: %d events (%d records x %d copies of %s, %d schema records), %.1f MiB, %.1f s" % (
        out_path, written, n, copies, os.path.basename(args.source), len(schemas),
        os.path.getsize(out_path) / 1048576, time.monotonic() - start))


if __name__ == "__main__":
    main()
