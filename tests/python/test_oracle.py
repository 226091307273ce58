"""memtl against PyTorch's own memory profiler, on real torch 2.x profiles.

Every workload of workloads.py and every fixture scenario of
collect/torch/record_fixtures.py is profiled, saved with memtl.save and
analyzed by the memtl command (memtl.binary(); MEMTL_BIN overrides); its data-flow
graph, categorized timeline, .json and .raw.json.gz exports must equal what
torch.profiler._memory_profiler computes for the same profile
(torch_oracle.py).

    PYTHONPATH=python MEMTL_BIN=build/cli/memtl python -m pytest tests/python/test_oracle.py -q

Needs pytest and torch >= 2.0 (whose profiler gives the ids memtl's answers
are compared by); anywhere else the module is skipped, as in CTest's
python_torch1.13 run with Debian's torch.
"""

import importlib.util
import os
import unittest

# unittest.SkipTest, not pytest.skip: the module is also importable by
# `unittest discover`, where pytest's Skipped would be an error; pytest
# reports unittest.SkipTest as a skipped module.
if importlib.util.find_spec("pytest") is None:
    raise unittest.SkipTest("the oracle tests need pytest")
import pytest  # noqa: E402

import torch  # noqa: E402

if int(torch.__version__.split(".")[0]) < 2:
    raise unittest.SkipTest("the oracle tests need torch >= 2.0 (this is %s)" % torch.__version__)
if importlib.util.find_spec("torch.profiler._memory_profiler") is None:
    raise unittest.SkipTest("this torch (%s) has no torch.profiler._memory_profiler" % torch.__version__)

import memtl  # noqa: E402

import torch_oracle  # noqa: E402
import workloads  # noqa: E402


@pytest.fixture(scope="module")
def memtl_binary():
    """Fails every test up front, with one clear message, when there is no
    memtl command to compare (MEMTL_BIN wrong, nothing built)."""
    try:
        path = memtl.binary()
    except memtl.ExportError as e:
        pytest.fail(str(e), pytrace=False)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail("memtl command %s is not an executable file (MEMTL_BIN?)" % path, pytrace=False)
    return path


def _check(prof):
    result = torch_oracle.compare(prof)
    if not result.equal:
        pytest.fail(result.report(), pytrace=False)


@pytest.mark.parametrize("name", sorted(workloads.WORKLOADS))
def test_workload(name, memtl_binary):
    _check(workloads.WORKLOADS[name]())


@pytest.mark.parametrize("name", [s.name for s in workloads.record_fixtures.SCENARIOS])
def test_fixture_scenario(name, memtl_binary):
    scenario = workloads.SCENARIOS[name]
    missing = scenario.missing()
    if missing:
        pytest.skip("needs %s" % ", ".join(missing))
    _check(workloads.record_fixtures.run(scenario))
