"""Cuts traces into seeds of at most LIMIT bytes for fuzz_structured.

    python3 tests/fuzz/split_seeds.py LIMIT OUTDIR TRACE...

libFuzzer cuts an input longer than -max_len at that length, which would
leave only the start of each fixture (its first records) for the mutator.
Instead each trace becomes windows of consecutive records, each a valid
trace of its own: the header, then records in file order until the window
is full; a record whose parent is not in the window becomes a root, the
records are numbered from 0, and the schema records of the window's op
names follow while they fit. Plain or gzip input.
"""

import gzip
import json
import os
import sys


def read_lines(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [line for line in data.decode("utf-8", "replace").split("\n") if line.strip()]


def window_text(header, records, schemas):
    ids = {}
    out = [header]
    for r in records:
        r = dict(r)
        if "p" in r:
            r["p"] = ids.get(r["p"], -1)
        if "i" in r:
            ids[r["i"]] = len(ids)
            r["i"] = ids[r["i"]]
        out.append(json.dumps(r, separators=(",", ":")))
    return out


def main():
    limit, outdir, paths = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    os.makedirs(outdir, exist_ok=True)
    for path in paths:
        lines = read_lines(path)
        if not lines:
            continue
        try:
            records = [json.loads(line) for line in lines[1:]]
        except ValueError:
            continue  # not a trace this can cut (the bad corpus is copied whole)
        header = lines[0]
        schemas = {r.get("op"): r for r in records if r.get("k") == "schema"}
        events = [r for r in records if r.get("k") != "schema"]
        name = os.path.basename(path).replace(".gz", "")
        if path.split(os.sep)[-2:-1] == ["torch2"]:
            name = "torch2_" + name
        start, n = 0, 0
        while start < len(events):
            size = len(header) + 1
            end = start
            while end < len(events):
                grow = len(json.dumps(events[end], separators=(",", ":"))) + 1
                if size + grow > limit and end > start:
                    break
                size += grow
                end += 1
            text = window_text(header, events[start:end], schemas)
            names = {r.get("name") for r in events[start:end]}
            for op, s in schemas.items():
                line = json.dumps(s, separators=(",", ":"))
                if op in names and size + len(line) + 1 <= limit:
                    text.append(line)
                    size += len(line) + 1
            body = "\n".join(text) + "\n"
            if len(body) <= limit:
                with open(os.path.join(outdir, "%s.%03d" % (name, n)), "w") as f:
                    f.write(body)
                n += 1
            start = end


if __name__ == "__main__":
    main()
