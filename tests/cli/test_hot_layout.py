#!/usr/bin/env python3
"""Checks the static memtl's code layout (cli/CMakeLists.txt, MEMTL_HOT_LAYOUT).

Fails when cli/hot_functions.txt has gone stale (a tenth or more of the memtl
functions it lists are no longer in the binary: regenerate it with
scripts/hot_functions.py), or when the linker did not place the listed
functions together at the start of .text (the span they occupy is more than
1.5 times their size, where it is about 1.15 times: glibc objects bring
a few unlisted neighbours along).

usage: test_hot_layout.py MEMTL_BINARY HOT_FUNCTIONS_TXT
"""
import subprocess
import sys


def main():
    binary, listing = sys.argv[1], sys.argv[2]
    names = [l.strip() for l in open(listing) if l.strip() and not l.startswith("#")]
    nm = subprocess.run(["nm", "-S", "--defined-only", binary], check=True, capture_output=True,
                        text=True).stdout
    where = {}
    for line in nm.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "tTwWiI":
            where.setdefault(p[3], (int(p[0], 16), int(p[1], 16)))
    ours = [n for n in names if n.startswith(("_ZN5memtl", "_ZNK5memtl", "_ZZN5memtl"))]
    missing = [n for n in ours if n not in where]
    if not ours or len(missing) * 10 >= len(ours):
        print(f"test_hot_layout: {len(missing)} of the {len(ours)} memtl functions in {listing} "
              f"are not in {binary} (e.g. {missing[:3]}): regenerate the list with "
              "scripts/hot_functions.py")
        return 1
    sections = subprocess.run(["readelf", "-SW", binary], check=True, capture_output=True,
                              text=True).stdout
    text = next(l for l in sections.splitlines() if " .text " in l).split()
    text_start = int(text[text.index(".text") + 2], 16)
    found = [where[n] for n in names if n in where]
    size = sum(s for _, s in found)
    end = max(a + s for a, s in found)
    span = end - text_start
    print(f"test_hot_layout: {len(found)} listed functions, {size} bytes, "
          f"in the first {span} bytes of .text ({span / size:.2f}x)")
    if span > 1.5 * size:
        print("test_hot_layout: the listed functions are not together at the start of .text "
              "(was memtl linked with lld and the ordering file?)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
