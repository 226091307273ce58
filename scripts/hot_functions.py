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
  * every fixture (and every defective one in fixtures/bad/ that memtl
    reads anyway) is exported to each format under valgrind's callgrind,
    which records every instruction the program runs; each address is
    mapped to the function (symbol) that contains it;
  * functions are grouped by the phase in which they first run (callgrind's
    profile is dumped where the read, identity, the graph and the timeline
    end): read, identity (with the checks and the op tree's orders), size
    map and graph, passes and timeline, export. Memory peaks in identity or
    the graph (10^5 events), so the code of the later phases, placed after,
    is not yet resident then;
  * for a glibc function that picks its implementation by CPU (an IFUNC:
    memcpy, strlen, ...), every implementation is listed, since the machine
    that runs memtl may pick another one than valgrind's emulated CPU: the
    AVX2 and AVX-512 ones with the first phase, the others last;
  * the cold part of a listed function (`f.cold`, split out by the compiler)
    is listed last as well: rare paths run in some runs and not in others;
  * what a real run does and a run under valgrind does not is added by name
    (UNSEEN): glibc's vDSO set-up (valgrind gives no vDSO), the C runtime's
    start-up and exit hooks, and the raw file calls glibc makes when a second
    thread gets its own malloc arena; valgrind also runs its own strlen,
    strchr (index) and strcmp in their place, so their implementations are
    added too (REDIRECTED). scripts/hot_functions.py --check lists, from the
    page faults of a real run (perf), any code run outside the list.

usage: scripts/hot_functions.py [--binary build/cli/memtl] [--out cli/hot_functions.txt]
       scripts/hot_functions.py --check [--binary build/cli/memtl]
Needs valgrind and nm (binutils), and perf for --check; takes about a minute.
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
# Where each phase of an export ends: the functions that first run in a
# later phase are placed after those of earlier ones, so that at the peak
# (identity or the graph, at 10^5 events) the code of the later stages is
# not yet resident.
CUTS = ["memtl::(anonymous namespace)::ReadFrom(", "memtl::AssignIdentity(",
        "memtl::DataFlowGraph::Build(", "memtl::BuildTimeline("]
# The suffix of a glibc IFUNC variant that an x86-64 CPU of the last decade
# picks (AVX2 or AVX-512/EVEX; not the RTM ones, which glibc uses only
# with transactional memory), or the family's resolver, run at start-up.
CURRENT_CPU = re.compile(r"^(?!.*rtm)(.*(evex|avx512|avx2|avx_).*)$|^ifunc$")


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
    # The defective traces that memtl reads anyway (a double free, a free of
    # another size, times out of order...): real traces have such defects,
    # and their diagnostics take paths no clean fixture does.
    for bad in sorted(glob.glob(os.path.join(ROOT, "fixtures/bad/*.trace*"))):
        with tempfile.TemporaryDirectory() as tmp:
            if subprocess.run([binary, "export", bad, "-o", os.path.join(tmp, "out.json")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                fixtures.append(bad)

    syms = Symbols(binary)
    demangled = subprocess.run(["nm", "-C", "--defined-only", binary], check=True,
                               capture_output=True, text=True).stdout
    cuts = []
    for prefix in CUTS:
        name = next((line.split(" ", 2)[2] for line in demangled.splitlines()
                     if line.split(" ", 2)[-1].startswith(prefix) and "::{lambda" not in line
                     and "[clone" not in line), None)
        if name is None:
            sys.exit(f"hot_functions: {prefix}...) not found in {binary}")
        cuts.append(name)

    def functions(profile):
        found = (syms.containing(a) for a in executed_addresses(profile, binary))
        return {f[2] for f in found if f is not None}

    # The phase in which each function first ran, over every run.
    phase = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fixture in fixtures:
            for fmt in FORMATS:
                profile = os.path.join(tmp, "callgrind.out")
                for old in glob.glob(profile + "*"):
                    os.remove(old)
                # The exit status is not checked: a fixture without memory
                # events is refused, and that path is worth listing too.
                subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=yes"] +
                               ["--dump-after=" + c for c in cuts] +
                               ["--callgrind-out-file=" + profile, binary, "export", fixture, "-o",
                                os.path.join(tmp, "out." + fmt)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                # profile.1, .2, ... hold the run up to each cut it reached,
                # in order, and `profile` the rest.
                dumps = sorted(glob.glob(profile + ".*"), key=lambda f: int(f.rsplit(".", 1)[1]))
                for i, dump in enumerate(dumps + [profile]):
                    for name in functions(dump):
                        phase[name] = min(phase.get(name, i), i)
    if not phase:
        sys.exit("hot_functions: callgrind recorded nothing (is valgrind installed?)")

    # Every CPU variant of the glibc functions used: those a current x86-64
    # machine picks run from the start, with everything else (UNSEEN); the
    # others (older CPUs, RTM, the generic C ones) go last, after the
    # export's code, where they cost nothing on the machines memtl runs on.
    names = {s[2] for s in syms.sized}
    used = {f for f in syms.ifuncs if any(n.startswith("__" + f + "_") for n in phase)}
    used.update(REDIRECTED)
    for n in UNSEEN:
        if n in syms.defined:
            phase.setdefault(n, 0)
    tail = set()
    for fam in used:
        variants = sorted(n for n in names if n.startswith("__" + fam + "_"))
        current = [n for n in variants if CURRENT_CPU.search(n[len(fam) + 3:])]
        for n in variants:
            if n in phase:
                continue
            if n in current or not current:
                phase[n] = 0
            else:
                tail.add(n)
    # The out-of-line cold part of a listed function (`f.cold`: the paths
    # the compiler, or the build's profile, deems rare) runs now and then,
    # in some runs and not others: it goes last too, with the variants.
    tail.update(n + ".cold" for n in phase if n + ".cold" in names and n + ".cold" not in phase)

    groups = [sorted(n for n, p in phase.items() if p == i) for i in range(len(cuts) + 1)]
    groups.append(sorted(tail))
    with open(args.out, "w") as out:
        out.write("# The functions `memtl export` runs, placed together by the linker in this\n"
                  "# order (cli/CMakeLists.txt): by the stage that first runs them (read,\n"
                  "# identity, graph, passes and timeline, export), then the CPU variants of\n"
                  "# glibc functions that current machines do not pick and the cold parts of\n"
                  "# the functions above. Generated by scripts/hot_functions.py; do not edit.\n")
        for group in groups:
            for name in group:
                out.write(name + "\n")
    print("hot_functions: " + " + ".join(str(len(g)) for g in groups) + " functions -> " +
          os.path.relpath(args.out, ROOT))


if __name__ == "__main__":
    main()
