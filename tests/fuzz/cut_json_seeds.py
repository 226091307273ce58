"""Cuts Kineto traces, execution traces and raw timelines into seeds of at
most LIMIT bytes for fuzz_kineto, fuzz_et and fuzz_raw.

    python3 tests/fuzz/cut_json_seeds.py LIMIT OUTDIR kineto TRACE...
    python3 tests/fuzz/cut_json_seeds.py LIMIT OUTDIR raw TIMELINE...
    python3 tests/fuzz/cut_json_seeds.py LIMIT OUTDIR et ET KINETO [ET KINETO...]

libFuzzer cuts an input longer than -max_len at that length, which leaves
no JSON for the mutator to parse. Each file becomes windows of consecutive
events (rows), each a valid document on one line: the Kineto trace's other
members (one device's properties), then events in file order from a start
until the window is full, the starts spread over the file and put a few
events before memory events. For the execution trace, the window is the Kineto trace's, and the
execution trace keeps its root nodes and the nodes whose record function
ids are in the window, so that the join finds its ops; the two documents
are joined by fuzz_et's separator line. Plain or gzip input.
"""

import gzip
import json
import os
import sys

SEP = "\n#kineto\n"  # json_mutator.h's kEtKinetoSeparator
WINDOWS = 6


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data.decode("utf-8", "replace"))


def dumps(v):
    return json.dumps(v, separators=(",", ":"))


def starts(events, n):
    mem = [i for i, e in enumerate(events) if isinstance(e, dict) and e.get("name") == "[memory]"]
    pool = mem or list(range(len(events)))
    if not pool:
        return [0]
    # A few events before: the op around the memory event starts earlier.
    return sorted({max(0, pool[k * len(pool) // n] - 8) for k in range(n)})


def kineto_window(doc, events, start, limit):
    """The Kineto trace with the events from `start` that fit in `limit`."""
    meta = {k: v for k, v in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else None
    if meta is not None and isinstance(meta.get("deviceProperties"), list):
        meta["deviceProperties"] = meta["deviceProperties"][:1]
    base = len(dumps(meta)) + 20 if meta is not None else 2
    out, size = [], base
    for e in events[start:]:
        s = len(dumps(e)) + 1
        if size + s > limit:
            break
        out.append(e)
        size += s
    if meta is None:
        return out
    result = {"traceEvents": out}
    result.update(meta)
    return result


def rf_id(node):
    if "rf_id" in node:
        return node["rf_id"]
    for a in node.get("attrs", []) or []:
        if isinstance(a, dict) and a.get("name") == "rf_id":
            return a.get("value")
    return None


def write(outdir, name, text):
    with open(os.path.join(outdir, name), "w", encoding="utf-8") as f:
        f.write(text)


def main():
    limit, outdir, kind = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    files = sys.argv[4:]
    os.makedirs(outdir, exist_ok=True)
    count = 0
    if kind == "kineto":
        for path in files:
            doc = load(path)
            events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
            base = os.path.basename(path).split(".")[0]
            for s in starts(events, WINDOWS):
                text = dumps(kineto_window(doc, events, s, limit))
                if len(text) <= limit:
                    write(outdir, "%s-%d.json" % (base, s), text)
                    count += 1
    elif kind == "raw":
        for path in files:
            rows = load(path)
            base = os.path.basename(path).split(".")[0]
            pre = [r for r in rows if r and r[0] == -1]
            for k in range(WINDOWS):
                s = k * len(rows) // WINDOWS
                out = list(pre[:8]) if k % 2 == 0 else []
                for r in rows[s:]:
                    if len(dumps(out + [r])) > limit:
                        break
                    if r not in out or r[0] != -1:
                        out.append(r)
                write(outdir, "%s-%d.json" % (base, s), dumps(out))
                count += 1
    elif kind == "et":
        for et_path, kineto_path in zip(files[0::2], files[1::2]):
            et, doc = load(et_path), load(kineto_path)
            events = doc.get("traceEvents", [])
            base = os.path.basename(et_path).split(".")[0]
            for s in starts(events, WINDOWS):
                budget = limit * 2 // 3
                while budget > 256:
                    k = kineto_window(doc, events, s, budget)
                    rfs = {e.get("args", {}).get("Record function id") for e in k["traceEvents"]
                           if isinstance(e, dict)}
                    nodes = [n for n in et["nodes"] if rf_id(n) in rfs or rf_id(n) in (0, None)]
                    small = {k2: v for k2, v in et.items() if k2 != "nodes"}
                    small["nodes"] = nodes
                    text = dumps(small) + SEP + dumps(k)
                    if len(text) <= limit:
                        write(outdir, "%s-%d.json" % (base, s), text)
                        count += 1
                        break
                    budget = budget * 3 // 4
    print("%s: %d seeds" % (kind, count))


if __name__ == "__main__":
    main()
