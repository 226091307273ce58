#!/usr/bin/env python3
"""Writes cli/hot_functions.txt, the functions that `memtl export` runs.

The static memtl binary is linked with lld, which places the functions named
in that file first, next to one another (cli/CMakeLists.txt). The kernel maps
a program's code in blocks around each page it runs (64 KiB, or the whole
page-cache folio), so code that runs scattered among code that never does
keeps most of the binary resident; placed together, it keeps about 60% of it
(docs/performance.md, ninth round). The file changes only where the layout
does: a function missing from it still runs, from the cold part.

How the list is made:
  * every fixture is exported to each format under valgrind's callgrind,
    which records every instruction the program runs; each address is
    mapped to the function (symbol) that contains it;
  * for a glibc function that picks its implementation by CPU (an IFUNC:
    memcpy, strlen, ...), every implementation is listed, since the machine
    that runs memtl may pick another one than valgrind's emulated CPU;
  * valgrind runs programs without a vDSO, so glibc's vDSO set-up, which
    every real run does before main, is added by name (VDSO_SETUP), and it
    runs its own strlen, strchr (index) and strcmp in their place, so their
    implementations are added too (REDIRECTED).

usage: scripts/hot_functions.py [--binary build/cli/memtl] [--out cli/hot_functions.txt]
Needs valgrind and nm (binutils); takes about a minute.
"""
import argparse
import bisect
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = ["json", "raw.json.gz", "html"]
# glibc 2.36: what _dl_non_dynamic_init runs to find the vDSO's functions.
VDSO_SETUP = [
    "_dl_new_object",
    "_dl_add_to_namespace_list",
    "_dl_setup_hash",
    "_dl_lookup_symbol_x",
    "do_lookup_x",
    "check_match",
    "_dl_name_match_p",
    "_dl_important_hwcaps",
]
# IFUNC families that valgrind replaces with its own code on amd64.
REDIRECTED = ["strlen", "strchr", "index", "strcmp"]


def symbols(binary):
    """(address, size, name) of every function in `binary`, by address."""
    out = subprocess.run(["nm", "-S", "--defined-only", binary], check=True,
                         capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "tTwWiI":
            syms.append((int(p[0], 16), int(p[1], 16), p[3]))
    syms.sort()
    return syms


def ifunc_names(binary):
    out = subprocess.run(["nm", "--defined-only", binary], check=True, capture_output=True,
                         text=True).stdout
    return {p[2] for p in (line.split() for line in out.splitlines()) if len(p) == 3 and p[1] == "i"}


def executed_addresses(profile, binary):
    """Instruction addresses run in `binary`, from a callgrind profile written
    with --dump-instr=yes."""
    objects = {}  # compressed object id -> path
    current = None
    last = 0
    addrs = set()
    # Object names are numbered where first written, in "ob=" or "cob=".
    ob = re.compile(r"c?ob=\((\d+)\)(?: (.*))?")
    with open(profile) as f:
        for line in f:
            if line.startswith(("ob=", "cob=")):
                m = ob.match(line.rstrip("\n"))
                if m.group(2):
                    objects[m.group(1)] = m.group(2)
                if line.startswith("ob="):
                    current = objects.get(m.group(1))
                continue
            tok = line.split(" ", 1)[0].rstrip("\n")
            if tok.startswith("0x"):
                a = int(tok, 16)
            elif tok[:1] in "+-" and tok[1:].isdigit():
                a = last + int(tok)
            elif tok == "*":
                a = last
            else:
                continue
            last = a
            if current is not None and os.path.realpath(current) == binary:
                addrs.add(a)
    return addrs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/cli/memtl"))
    ap.add_argument("--out", default=os.path.join(ROOT, "cli/hot_functions.txt"))
    args = ap.parse_args()
    binary = os.path.realpath(args.binary)
    fixtures = sorted(glob.glob(os.path.join(ROOT, "fixtures/*.trace.jsonl.gz")))
    if not fixtures:
        sys.exit("hot_functions: no fixtures found")

    syms = symbols(binary)
    starts = [s[0] for s in syms]
    hot = set()
    with tempfile.TemporaryDirectory() as tmp:
        for fixture in fixtures:
            for fmt in FORMATS:
                profile = os.path.join(tmp, "callgrind.out")
                # The exit status is not checked: a fixture without memory
                # events is refused, and that path is worth listing too.
                subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=yes",
                                "--callgrind-out-file=" + profile, binary, "export", fixture,
                                "-o", os.path.join(tmp, "out." + fmt)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for a in executed_addresses(profile, binary):
                    i = bisect.bisect_right(starts, a) - 1
                    if i >= 0 and a < syms[i][0] + max(syms[i][1], 1):
                        hot.add(syms[i][2])
    if not hot:
        sys.exit("hot_functions: callgrind recorded nothing (is valgrind installed?)")

    names = {s[2] for s in syms}
    families = {n for n in ifunc_names(binary)}
    used = {f for f in families if any(n.startswith("__" + f + "_") for n in hot)}
    used.update(REDIRECTED)
    for fam in used:
        hot.update(n for n in names if n.startswith("__" + fam + "_"))
    hot.update(n for n in VDSO_SETUP if n in names)

    with open(args.out, "w") as out:
        out.write("# The functions `memtl export` runs, placed together by the linker\n"
                  "# (cli/CMakeLists.txt). Generated by scripts/hot_functions.py; do not edit.\n")
        for name in sorted(hot):
            out.write(name + "\n")
    print(f"hot_functions: {len(hot)} functions -> {os.path.relpath(args.out, ROOT)}")


if __name__ == "__main__":
    main()
