#!/usr/bin/env python3
"""Writes cli/hot_functions.txt, the functions that `memtl export` runs.

The static memtl binary is linked with lld, which places the functions named
in that file first, next to one another, in the order listed
(cli/CMakeLists.txt). The kernel maps
a program's code in blocks around each page it runs (64 KiB, or the whole
page-cache folio), so code that runs scattered among code that never does
keeps most of the binary resident; placed together, it keeps about 60% of it
(docs/performance.md, ninth round). The file changes only where the layout
does: a function missing from it still runs, from the cold part.

How the list is made:
  * every fixture is exported to each format under valgrind's callgrind,
    which records every instruction the program runs; each address is
    mapped to the function (symbol) that contains it;
  * the functions that run up to the end of the timeline come first, those
    that only the export runs after them: memory peaks before the export
    (which runs once the trace's records are freed), so the export's code,
    placed apart, is not resident at the peak (callgrind's profile is cut
    where BuildTimeline returns);
  * for a glibc function that picks its implementation by CPU (an IFUNC:
    memcpy, strlen, ...), every implementation is listed, since the machine
    that runs memtl may pick another one than valgrind's emulated CPU;
  * what a real run does and a run under valgrind does not is added by name
    (UNSEEN): glibc's vDSO set-up (valgrind gives no vDSO), the C runtime's
    start-up and exit hooks, and the raw file calls glibc makes when a second
    thread gets its own malloc arena; valgrind also runs its own strlen,
    strchr (index) and strcmp in their place, so their implementations are
    added too (REDIRECTED). scripts/hot_functions.py --check lists, from the
    page faults of a real run (perf), any code run outside the list.

usage: scripts/hot_functions.py [--binary build/cli/memtl] [--out cli/hot_functions.txt]
       scripts/hot_functions.py --check [--binary build/cli/memtl]
Needs valgrind and nm (binutils), and perf for --check; takes about half a minute.
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
# glibc 2.36 and GCC 12's crtbegin.o.
UNSEEN = [
    # what _dl_non_dynamic_init runs to find the vDSO's functions

    "_dl_new_object",
    "_dl_add_to_namespace_list",
    "_dl_setup_hash",
    "_dl_lookup_symbol_x",
    "do_lookup_x",
    "check_match",
    "_dl_name_match_p",
    "_dl_important_hwcaps",
    # crtbegin.o's hooks, run from .init_array and .fini_array
    "frame_dummy",
    "register_tm_clones",
    "deregister_tm_clones",
    "__do_global_dtors_aux",
    # a new malloc arena reads /proc/sys/vm/overcommit_memory
    "__open64_nocancel",
    "__read_nocancel",
    "__close_nocancel",
    # a thread that finds a lock taken waits in the kernel (under valgrind's
    # serialized threads it happens in some runs only)
    "__lll_lock_wait",
    "__lll_lock_wake",
]
# IFUNC families that valgrind replaces with its own code on amd64.
REDIRECTED = ["strlen", "strchr", "index", "strcmp"]


class Symbols:
    """The functions of `binary` (nm -S): `sized` is (address, size, name) by
    address; `defined` every defined symbol's name, sized or not (crtbegin.o's
    functions have no size); `ifuncs` the names of IFUNC symbols."""

    def __init__(self, binary):
        out = subprocess.run(["nm", "-S", "--defined-only", binary], check=True,
                             capture_output=True, text=True).stdout
        self.sized, self.defined, self.ifuncs = [], set(), set()
        for line in out.splitlines():
            p = line.split()
            if len(p) < 3:
                continue
            kind, name = p[-2], p[-1]
            self.defined.add(name)
            if kind == "i":
                self.ifuncs.add(name)
            if len(p) == 4 and kind in "tTwWiI":
                self.sized.append((int(p[0], 16), int(p[1], 16), name))
        self.sized.sort()
        self.starts = [s[0] for s in self.sized]

    def containing(self, address):
        """The (address, size, name) of the function holding `address`, or None."""
        i = bisect.bisect_right(self.starts, address) - 1
        if i >= 0 and address < self.sized[i][0] + max(self.sized[i][1], 1):
            return self.sized[i]
        return None


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
                    objects[m.group(1)] = os.path.realpath(m.group(2))
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
            if current == binary:
                addrs.add(a)
    return addrs


def check(binary, listing):
    """Prints the functions outside `listing` whose code a real export of each
    format faulted in (perf's page-fault samples); returns how many."""
    names = {l.strip() for l in open(listing) if l.strip() and not l.startswith("#")}
    syms = Symbols(binary)
    listed = {s[0] for s in syms.sized if s[2] in names}  # by address: aliases count
    start_sym = next(s for s in syms.sized if s[2] == "_start")
    outside = set()
    with tempfile.TemporaryDirectory() as tmp:
        # Large enough for every thread a real export starts (10^5 events).
        fixture = os.path.join(tmp, "t.trace.jsonl.gz")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/bench/gen_trace.py"), "--source",
                        os.path.join(ROOT, "fixtures/resnet18_sgd_step.trace.jsonl.gz"),
                        "--events", "100000", "--out", fixture], check=True,
                       stdout=subprocess.DEVNULL)
        for fmt in FORMATS:
            data = os.path.join(tmp, "perf.data")
            subprocess.run(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o", data,
                            binary, "export", fixture, "-o", os.path.join(tmp, "out." + fmt)],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            script = subprocess.run(["perf", "script", "-i", data, "-F", "addr,sym"], check=True,
                                    capture_output=True, text=True).stdout
            rows = [line.split() for line in script.splitlines()]
            base = next(int(r[0], 16) - start_sym[0] for r in rows if len(r) > 1 and r[1] == "_start")
            for r in rows:
                f = syms.containing(int(r[0], 16) - base)
                if f is not None and f[0] not in listed:
                    outside.add(f[2])
    for name in sorted(outside):
        print("not listed, but faulted in:", name)
    return len(outside)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/cli/memtl"))
    ap.add_argument("--out", default=os.path.join(ROOT, "cli/hot_functions.txt"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    binary = os.path.realpath(args.binary)
    if args.check:
        sys.exit(1 if check(binary, args.out) else 0)
    fixtures = sorted(glob.glob(os.path.join(ROOT, "fixtures/*.trace.jsonl.gz")))
    if not fixtures:
        sys.exit("hot_functions: no fixtures found")

    syms = Symbols(binary)
    demangled = subprocess.run(["nm", "-C", "--defined-only", binary], check=True,
                               capture_output=True, text=True).stdout
    cut = next((line.split(" ", 2)[2] for line in demangled.splitlines()
                if " memtl::BuildTimeline(" in line and "::{lambda" not in line
                and "[clone" not in line), None)
    if cut is None:
        sys.exit("hot_functions: memtl::BuildTimeline not found in " + binary)

    def functions(profile):
        found = (syms.containing(a) for a in executed_addresses(profile, binary))
        return {f[2] for f in found if f is not None}

    early, late = set(), set()
    with tempfile.TemporaryDirectory() as tmp:
        for fixture in fixtures:
            for fmt in FORMATS:
                profile = os.path.join(tmp, "callgrind.out")
                for old in glob.glob(profile + "*"):
                    os.remove(old)
                # The exit status is not checked: a fixture without memory
                # events is refused, and that path is worth listing too.
                subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=yes",
                                "--dump-after=" + cut, "--callgrind-out-file=" + profile, binary,
                                "export", fixture, "-o", os.path.join(tmp, "out." + fmt)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                # With a cut, profile.1 holds the run up to it and `profile`
                # the rest; without one (a refused trace), `profile` is all.
                if os.path.exists(profile + ".1"):
                    early |= functions(profile + ".1")
                    late |= functions(profile)
                else:
                    early |= functions(profile)
    if not early:
        sys.exit("hot_functions: callgrind recorded nothing (is valgrind installed?)")
    hot = early | late

    names = {s[2] for s in syms.sized}
    used = {f for f in syms.ifuncs if any(n.startswith("__" + f + "_") for n in hot)}
    used.update(REDIRECTED)
    for fam in used:
        hot.update(n for n in names if n.startswith("__" + fam + "_"))
    hot.update(n for n in UNSEEN if n in syms.defined)
    # glibc's string functions and start-up run early; the rest of what only
    # the export ran goes last.
    early |= hot - late
    late -= early

    with open(args.out, "w") as out:
        out.write("# The functions `memtl export` runs, placed together by the linker in this\n"
                  "# order (cli/CMakeLists.txt): those that run up to the end of the timeline,\n"
                  "# then those only the export runs. Generated by scripts/hot_functions.py;\n"
                  "# do not edit.\n")
        for name in sorted(early) + sorted(late):
            out.write(name + "\n")
    print(f"hot_functions: {len(early)} + {len(late)} functions -> "
          f"{os.path.relpath(args.out, ROOT)}")


if __name__ == "__main__":
    main()
