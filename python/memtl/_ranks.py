"""memtl.analyze: the per-rank summaries of a distributed run's traces, on
this machine's cores or on any concurrent.futures.Executor (Dask's
``Client.get_executor()``, Ray's, a process pool): one task per trace, each
running the ``memtl`` command on that trace alone, so a cluster's workers
read the traces where they lie (shared storage) and send back one small row
each. The rows are compared here by the rules of ``memtl ranks``
(docs/distributed.md), which the tests check give the same answer.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
from typing import Iterable, List, Optional, Union

_SUFFIXES = (".json", ".json.gz", ".jsonl", ".jsonl.gz")
_OUTLIER_SHARE = 0.10  # as memtl ranks (core/explain/ranks.h, kOutlierShare)


def _expand(paths) -> List[str]:
    """The files that `paths` (a path, a directory, a glob pattern, or a list
    of them) name, sorted, each once; as memtl ranks expands its arguments."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            found = [os.path.join(p, n) for n in os.listdir(p)
                     if n.endswith(_SUFFIXES) and os.path.isfile(os.path.join(p, n))]
            if not found:
                raise ValueError("%s: no trace in this directory" % p)
            out += found
        elif os.path.exists(p) or not any(c in p for c in "*?["):
            out.append(p)
        else:
            found = glob.glob(p)
            if not found:
                raise ValueError("%s: no file matches this pattern" % p)
            out += found
    return sorted(set(out))


def rank_row(path: str, program: Optional[str] = None) -> dict:
    """One trace's row, as ``memtl ranks --format json`` gives it (a task for
    an executor: a top-level function of plain arguments, so it pickles).
    A trace that cannot be analyzed gives a row with its "error"."""
    if program is None:
        from . import binary
        program = binary()
    r = subprocess.run([program, "ranks", "-q", "-j", "1", "--format", "json", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.stdout.strip():
        rows = json.loads(r.stdout)["ranks"]
        if len(rows) == 1:
            return rows[0]
    message = r.stderr.strip().splitlines()[0] if r.stderr.strip() else "status %d" % r.returncode
    return {"rank": None, "trace": path, "error": message[len("memtl: "):] if message.startswith("memtl: ") else message}


def _files(rows, indices):
    names = [rows[i]["trace"] for i in indices[:4]]
    more = " and %d more" % (len(indices) - 4) if len(indices) > 4 else ""
    return ", ".join(names) + more


def compare(rows: List[dict]) -> dict:
    """The rows as one run's ranks, by the rules of memtl ranks: ValueError
    naming the files for the same rank twice, different world sizes or
    runs, or a rank past the world size; else the report (ranks by rank,
    failures last; the median peak, the skew and the outlier ranks)."""
    by_rank, by_world, by_run = {}, {}, {}
    for i, r in enumerate(rows):
        if r.get("error"):
            continue
        if r.get("rank") is not None:
            by_rank.setdefault(r["rank"], []).append(i)
        if r.get("world_size") is not None:
            by_world.setdefault(r["world_size"], []).append(i)
        if r.get("run"):
            by_run.setdefault(r["run"], []).append(i)
    for rank in sorted(by_rank):
        if len(by_rank[rank]) > 1:
            raise ValueError("rank %d twice: %s" % (rank, _files(rows, by_rank[rank])))
    if len(by_world) > 1:
        raise ValueError("traces of different world sizes (%s)" % "; ".join(
            "world size %d: %s" % (w, _files(rows, by_world[w])) for w in sorted(by_world)))
    if len(by_run) > 1:
        raise ValueError("traces of different runs (%s)" % "; ".join(
            'run "%s": %s' % (r, _files(rows, by_run[r])) for r in sorted(by_run)))
    if by_world and by_rank and max(by_rank) >= min(by_world):
        raise ValueError("rank %d of a world of %d: %s" % (max(by_rank), min(by_world),
                                                           _files(rows, by_rank[max(by_rank)])))
    ordered = sorted(rows, key=lambda r: (bool(r.get("error")), r.get("rank") is None,
                                          r.get("rank") if r.get("rank") is not None else 0, r["trace"]))
    peaks = sorted(r["peak_bytes"] for r in ordered if not r.get("error"))
    report = {"ranks": ordered, "median_peak_bytes": 0, "skew": 0, "outliers": []}
    if not peaks:
        return report
    n = len(peaks)
    median = peaks[n // 2] if n % 2 else peaks[n // 2 - 1] + (peaks[n // 2] - peaks[n // 2 - 1]) // 2
    report["median_peak_bytes"] = median
    report["skew"] = float("%.6g" % (peaks[-1] / median)) if median > 0 else 1
    for r in ordered:
        if not r.get("error"):
            # With two ranks the median is their midpoint: neither is the odd one.
            r["outlier"] = n >= 3 and median > 0 and abs(r["peak_bytes"] - median) > _OUTLIER_SHARE * median
            if r["outlier"]:
                report["outliers"].append(r["rank"] if r.get("rank") is not None else r["trace"])
    return report


def analyze(paths: Union[str, os.PathLike, Iterable], executor=None) -> dict:
    """The per-rank summaries of one distributed run's traces.

    ``paths``: a trace, a directory of them, a glob pattern, or a list of
    these. ``executor``: any ``concurrent.futures.Executor`` (Dask's
    ``Client.get_executor()``, Ray's, a ``ProcessPoolExecutor``); each trace
    is one task running the ``memtl`` command on it, which the executor's
    workers must have (pip install memtl there too). Without one, the
    ``memtl ranks`` command analyzes the traces on this machine's cores.

    Returns the report of ``memtl ranks --format json``: ``ranks`` (one row
    per rank: ``rank``, ``trace``, ``device``, ``peak_bytes``, ``peak_us``,
    ``step``, ``at_peak`` by category, ``truncated``, ``outlier``; a trace
    that could not be analyzed has its ``error``), ``median_peak_bytes``,
    ``skew`` (the largest peak over the median) and ``outliers``. Traces
    that are not one run's distinct ranks raise ValueError naming them.
    """
    from . import binary
    files = _expand(paths)
    if not files:
        raise ValueError("no trace given")
    program = binary()
    if executor is None:
        r = subprocess.run([program, "ranks", "-q", "--format", "json"] + files,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.stdout.strip():  # the report, also when some rank failed (its row says why)
            return json.loads(r.stdout)
        message = r.stderr.strip().splitlines()[0] if r.stderr.strip() else "status %d" % r.returncode
        raise ValueError(message[len("memtl: "):] if message.startswith("memtl: ") else message)
    futures = [executor.submit(rank_row, f, program) for f in files]
    return compare([f.result() for f in futures])
