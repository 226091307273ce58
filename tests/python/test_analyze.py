"""memtl.analyze (python/memtl/_ranks.py): the per-rank summaries of a
run's traces, by the memtl ranks command on this machine, and one task per
trace on any concurrent.futures.Executor: a thread pool and a real Dask
LocalCluster (PyPI `distributed`, workers on loopback, stopped by the
test). All three must give memtl ranks' report. The rank traces are
fixtures given a rank, a world size and a run in their header.
"""

import concurrent.futures
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import unittest

if importlib.util.find_spec("pytest") is None:
    raise unittest.SkipTest("the analyze tests need pytest")
import pytest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import memtl  # noqa: E402

FIXTURES = ["e2e_fwd_bwd_sgd", "e2e_adam", "e2e_fwd_bwd_sgd", "e2e_sequential_set_to_none_true"]


def _rank_trace(fixture, rank, world, run, out):
    with gzip.open(os.path.join(ROOT, "fixtures", "torch2", fixture + ".trace.jsonl.gz"), "rt") as f:
        lines = f.read().splitlines(True)
    header = json.loads(lines[0])
    header.update({"rank": rank, "world_size": world, "run": run})
    with open(out, "w") as f:
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        f.writelines(lines[1:])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("ranks")
    for rank, fixture in enumerate(FIXTURES):
        _rank_trace(fixture, rank, len(FIXTURES), "job", str(d / ("step.rank%d.trace.jsonl" % rank)))
    return str(d)


def test_the_command_and_a_thread_pool_agree(run_dir):
    local = memtl.analyze(run_dir)
    assert [r["rank"] for r in local["ranks"]] == [0, 1, 2, 3]
    assert local["skew"] > 1 and 1 in local["outliers"]
    cli = json.loads(subprocess.run([memtl.binary(), "ranks", "--format", "json", "-q", run_dir],
                                    stdout=subprocess.PIPE, check=True, text=True).stdout)
    assert local == cli
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        assert memtl.analyze(os.path.join(run_dir, "*.trace.jsonl"), executor=pool) == local


def test_not_one_run_names_the_files(run_dir, tmp_path):
    again = str(tmp_path / "again.trace.jsonl")
    _rank_trace("e2e_adam", 1, len(FIXTURES), "job", again)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for executor in (None, pool):
            with pytest.raises(ValueError, match="rank 1 twice: .*again.trace.jsonl"):
                memtl.analyze([run_dir, again], executor=executor)


def test_a_dask_local_cluster(run_dir):
    distributed = pytest.importorskip("distributed")
    local = memtl.analyze(run_dir)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=40) as cluster:
        with distributed.Client(cluster, timeout="60s") as client:
            assert memtl.analyze(run_dir, executor=client.get_executor()) == local
