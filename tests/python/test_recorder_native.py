"""The recorder's native walk (collect/torch/native, built into
memtl._memtl_torch_native): byte for byte the same trace as the Python walk
of python/memtl/_recorder.py, on an ordinary step and on a profile of odd
values; refused when built against another libtorch.

Run from the repository root: /usr/bin/python3 -m unittest discover -s tests/python
"""

import gzip
import os
import re
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the source tree's package
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from memtl import _recorder as recorder  # noqa: E402
from test_recorder import profile, small_step  # noqa: E402
from trace_format import check_trace  # noqa: E402

# CTest sets this when the build made the extension: the tests then fail,
# instead of skipping, when it does not load.
NATIVE_EXPECTED = os.environ.get("MEMTL_TORCH_NATIVE_EXPECTED") == "1"


def odd_values_step():
    """A profile with what the formatting has to get right: names with quotes,
    backslashes, control and non-ASCII characters (a user scope), floats at
    the edges of repr's fixed and exponent forms, non-finite and complex
    scalars, every dtype, a sparse layout, tensor lists, modules and an
    optimizer with state."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    opt = torch.optim.Adam(model.parameters())
    x = torch.ones(3, 4)
    c = torch.ones(2, dtype=torch.complex64)
    model(x).sum().backward()
    opt.step()  # Adam's state exists before the profiled step
    with profile() as prof:
        with torch.profiler.record_function('u\u00fcn "q" \\ \t\x01 \U0001d11e \x7f'):
            for v in (1e-20, 2.5e17, -0.0, 1e16, 1e15, 0.1, 123456.789, float("nan"), float("inf"), 5e-324,
                      1.7976931348623157e308, 1e-5, 0.0001, -1.5e-300):
                torch.full((1,), v, dtype=torch.float64)  # a Scalar (a method's float becomes a tensor)
            torch.full((1,), complex(1.5, -2e-7))
            c.mul(2)
            torch.cat([x, x])
            for d in (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
                      torch.int32, torch.int64, torch.bool, torch.complex128):
                torch.zeros(2, dtype=d).clone()
            torch.eye(3).to_sparse().coalesce()
            x.clamp(min=-0.5, max=0.5)
        model(x).sum().backward()
        opt.step()
    return prof


class python_walk:
    """Within the block, memtl_torch walks in Python."""

    def __enter__(self):
        self.saved = recorder._native
        recorder._native = False

    def __exit__(self, *exc):
        recorder._native = self.saved


class NativeWalkTest(unittest.TestCase):
    def setUp(self):
        if recorder.native_walk() is None:
            if NATIVE_EXPECTED:
                self.fail("the native walk was built but does not load: " + recorder.NATIVE_ERROR)
            self.skipTest("native walk not available: " + recorder.NATIVE_ERROR)
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def assertSameTrace(self, prof, name):
        native = os.path.join(self.dir.name, "native." + name)
        python = os.path.join(self.dir.name, "python." + name)
        recorder.save(prof, native)
        with python_walk():
            recorder.save(prof, python)
        opener = gzip.open if name.endswith(".gz") else open
        # The header's recorded_at is the time of each save, not of the
        # walk: two saves a second apart differ there and nowhere else.
        saved_at = re.compile(rb'"recorded_at":"[^"]*"')
        with opener(native, "rb") as f:
            a = saved_at.sub(b'"recorded_at":""', f.read(), count=1)
        with opener(python, "rb") as f:
            b = saved_at.sub(b'"recorded_at":""', f.read(), count=1)
        self.assertGreater(a.count(b"\n"), 10)
        # The format checks of every writer (trace_format.py), on both walks.
        self.assertEqual(check_trace(native), [])
        self.assertEqual(check_trace(python), [])
        for k, (x, y) in enumerate(zip(a.split(b"\n"), b.split(b"\n"))):
            self.assertEqual(x, y, "line %d" % k)
        self.assertEqual(a, b)
        return a

    def test_same_bytes_as_the_python_walk(self):
        text = self.assertSameTrace(small_step(), "t.trace.jsonl.gz")
        self.assertIn(b'"k":"py"', text)
        self.assertIn(b'"k":"schema"', text)

    def test_same_bytes_on_odd_values(self):
        prof = odd_values_step()
        text = self.assertSameTrace(prof, "t.trace.jsonl.gz")
        self.assertSameTrace(prof, "t.trace.jsonl")  # the plain-text sink
        for needle in (b'\\u00fcn \\"q\\" \\\\ \\t\\u0001 \\ud834\\udd1e \\u007f', b'{"float":1e-20}',
                       b'{"float":2.5e+17}', b'{"float":-0.0}', b'{"float":1e+16}',
                       b'{"float":1000000000000000.0}', b'{"float":"nan"}', b'{"float":5e-324}',
                       b'{"float":0.0001}', b'{"float":-1.5e-300}', b'{"float":1.7976931348623157e+308}',
                       b'{"complex":[1.5,-2e-07]}', b'"layout":"sparse_coo"', b'"dtype":"bfloat16"',
                       b'"dtype":"complex128"', b'{"list":[]}', b'"optimizer":{"self":'):
            self.assertTrue(needle in text, needle)

    def test_built_against_another_torch_is_not_loaded(self):
        # A module whose build names another libtorch than the process's is
        # refused before loading, and the Python walk is used.
        import shutil

        native = recorder.native_walk()
        d = os.path.join(self.dir.name, "other")
        os.makedirs(d)
        shutil.copy(native.__file__, d)
        with open(os.path.join(d, "_memtl_torch_native.torch_lib"), "w") as f:
            f.write("/nonexistent/libtorch_cpu.so.1.13.0\n")
        saved, saved_env = recorder._native, os.environ.get("MEMTL_TORCH_NATIVE")
        try:
            recorder._native = None
            os.environ["MEMTL_TORCH_NATIVE"] = d
            self.assertIsNone(recorder.native_walk())
            self.assertIn("built against /nonexistent/libtorch_cpu.so.1.13.0", recorder.NATIVE_ERROR)
        finally:
            recorder._native = saved
            if saved_env is None:
                del os.environ["MEMTL_TORCH_NATIVE"]
            else:
                os.environ["MEMTL_TORCH_NATIVE"] = saved_env

    def test_a_stand_in_takes_the_python_walk(self):
        with self.assertRaises(TypeError):
            recorder.native_walk().walk_v1([object()], lambda b: None)
