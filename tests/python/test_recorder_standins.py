"""Tests of the PyTorch recorder (python/memtl/_recorder.py) on stand-in
objects of PyTorch's event classes: the shapes of an event tree that a real
profile of the installed torch does not produce on demand (missing ids,
scalar lists, unknown settings, very deep trees, 1.13's uneven input lists).
Real profiles are tested in test_recorder.py.
"""

import enum
import io
import json
import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the source tree's package

import torch  # noqa: E402

from memtl import _recorder as recorder  # noqa: E402


def _reject_constant(name):
    raise ValueError("non-standard JSON constant %s" % name)


def strict_loads(line):
    """json.loads that rejects NaN/Infinity, as memtl's reader does."""
    return json.loads(line, parse_constant=_reject_constant)


# ---- PyTorch >= 2.0 stand-ins -------------------------------------------------

class _EventType(enum.Enum):
    TorchOp = 0
    Backend = 1
    Allocation = 2
    OutOfMemory = 3
    PyCall = 4
    PyCCall = 5
    Kineto = 6


class _Scope(enum.Enum):
    FUNCTION = 0
    BACKWARD_FUNCTION = 1


class _TM:
    """Stands in for torch._C._profiler._TensorMetadata (2.x)."""

    def __init__(self, impl, ptr, id, aid, sizes=(4,), strides=(1,)):
        self.impl_ptr, self.storage_data_ptr, self.id, self.allocation_id = impl, ptr, id, aid
        self.device, self.dtype, self.layout = torch.device("cpu"), torch.float32, torch.strided
        self.sizes, self.strides = list(sizes), list(strides)


class _Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _event(kind, fields, name, t0, t1, children=()):
    return _Obj(typed=(kind, fields), extra_fields=fields, name=name, start_time_ns=t0, end_time_ns=t1, start_tid=1,
                children=list(children))


# PyTorch binds one fields class per event type, named _ExtraFields_<EventType>.
_FIELDS = {k: type("_ExtraFields_" + k.name, (_Obj,), {}) for k in _EventType}


def _typed(kind, name, t0, t1, children=(), **fields):
    """A 2.x event whose fields are of the class PyTorch binds for `kind`."""
    return _event(kind, _FIELDS[kind](**fields), name, t0, t1, children)


def _alloc(ptr, size, t, id=None, aid=None, dev="cpu"):
    return _typed(_EventType.Allocation, "[memory]", t, t, ptr=ptr, id=id, allocation_id=aid, alloc_size=size,
                  device=torch.device(dev), total_allocated=max(size, 0), total_reserved=0)


def _op(name, inputs, t0, t1, children=(), scope=_Scope.FUNCTION, seq=-1):
    return _typed(_EventType.TorchOp, name, t0, t1, children, inputs=inputs, scope=scope, sequence_number=seq)


def _records(roots, **kw):
    out = io.StringIO()
    recorder.write_events(roots, out, "2.1.0", **kw)
    return [strict_loads(x) for x in out.getvalue().splitlines()]


class V2EdgeCaseTest(unittest.TestCase):
    """Shapes of the 2.x event tree that a real profile of this torch does not
    produce on demand (missing ids, scalar lists, unknown settings, very deep
    trees), on stand-in objects of PyTorch's classes."""

    def test_scalar_lists_are_not_tensor_lists(self):
        # Newer PyTorch records some int[] inputs as concrete values: the
        # format has no int-list form, so they are "not captured" (null).
        t = _TM(10, 100, 5, 6)
        lines = _records([_op("aten::view", [t, [2, 2]], 1, 2), _op("aten::cat", [[t, None], 0], 3, 4),
                          _op("aten::stack", [[], 0], 5, 6), _alloc(1, 4, 7, 1, 1)])
        self.assertIsNone(lines[1]["args"][1])
        self.assertEqual(lines[2]["args"][0]["list"][0]["impl"], 10)
        self.assertEqual(lines[2]["args"][0]["list"][1], None)
        self.assertEqual(lines[3]["args"][0], {"list": []})

    def test_missing_ids_turn_ids_off(self):
        # A 2.x run whose ids were not computed: the header says so and no
        # record carries a partial id.
        t = _TM(10, 100, None, None)
        lines = _records([_op("aten::add", [t], 1, 5, [_alloc(100, 16, 2)])])
        self.assertFalse(lines[0]["ids"])
        self.assertEqual((lines[1]["args"][0]["id"], lines[1]["args"][0]["aid"]), (None, None))
        self.assertEqual((lines[2]["id"], lines[2]["aid"]), (None, None))

    def test_ids_missing_after_some_were_written(self):
        # The walk writes ids until an allocation has none, then starts over
        # without: no record keeps the ids written before.
        t = _TM(10, 100, 5, 6)
        lines = _records([_op("aten::add", [t], 1, 9, [_alloc(100, 16, 2, 5, 6), _alloc(200, 16, 3)]),
                          _op("aten::mul", [t], 10, 11)])
        self.assertFalse(lines[0]["ids"])
        self.assertEqual(len(lines), 5)
        for r in (lines[1], lines[4]):
            self.assertEqual((r["args"][0]["id"], r["args"][0]["aid"]), (None, None))
        for r in lines[2:4]:
            self.assertEqual((r["k"], r["id"], r["aid"]), ("alloc", None, None))

    def test_settings_judged_from_events_when_unknown(self):
        t = _TM(10, 100, 1, 1)
        # no allocation at all: profile_memory was off
        with self.assertRaises(recorder.RecorderError) as cm:
            _records([_op("aten::add", [t], 1, 5)])
        self.assertIn("profile_memory=True", str(cm.exception))
        # operators, none with any input: record_shapes was off
        with self.assertRaises(recorder.RecorderError) as cm:
            _records([_op("aten::add", [], 1, 5), _op("aten::mul", [], 6, 7), _alloc(1, 4, 8, 1, 1)])
        self.assertIn("record_shapes=True", str(cm.exception))
        # a legitimately tiny trace: one annotation (no "::") and one allocation
        lines = _records([_op("My Annotation", [], 1, 5, [_alloc(1, 4, 2, 1, 1)])])
        self.assertEqual([r["k"] for r in lines[1:]], ["op", "alloc"])
        # settings the profile states are trusted: no allocation is an empty timeline
        lines = _records([_op("aten::add", [t], 1, 5)], settings={"record_shapes": True, "profile_memory": True})
        self.assertEqual(len(lines), 2)
        # nothing is written before an error
        out = io.StringIO()
        with self.assertRaises(recorder.RecorderError):
            recorder.write_events([_op("aten::add", [t], 1, 5)], out)
        self.assertEqual(out.getvalue(), "")

    def test_python_call_name_that_is_not_utf8(self):
        # torch 2.13's binding raises UnicodeDecodeError for some C calls'
        # names (now and then): the call is kept under a name that says so.
        class BadName(_Obj):
            @property
            def name(self):
                raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

        fields = _FIELDS[_EventType.PyCCall]()
        bad = BadName(typed=(_EventType.PyCCall, fields), extra_fields=fields, start_time_ns=2, end_time_ns=3,
                      start_tid=1, children=[])
        lines = _records([_op("aten::add", [_TM(10, 100, 1, 1)], 1, 5, [bad, _alloc(100, 16, 4, 1, 1)])])
        self.assertEqual(lines[2]["k"], "py")
        self.assertEqual(lines[2]["name"], recorder.UNDECODABLE_NAME)

    def test_deep_tree_is_walked_iteratively(self):
        depth = 50000  # far past Python's recursion limit
        node = _alloc(1, 4, depth, 1, 1)
        for d in range(depth - 1, -1, -1):
            node = _op("aten::f%d" % (d % 3), [], d, 2 * depth - d, [node])
        n, allocs = recorder.write_events([node], io.StringIO(), settings={"record_shapes": True})
        self.assertEqual((n, allocs), (depth + 1, 1))
        lines = _records([node], settings={"record_shapes": True}, schema_lookup=lambda name: [name + "() -> ()"])
        self.assertEqual(lines[-4]["p"], depth - 1)  # the allocation, below the deepest op
        self.assertEqual([(r["k"], r["op"], r["schemas"]) for r in lines[-3:]],  # one schema record per name, last
                         [("schema", "aten::f%d" % k, ["aten::f%d() -> ()" % k]) for k in range(3)])
        self.assertTrue(all(r["p"] == r["i"] - 1 for r in lines[1:-3]))


# ---- torch 1.13 stand-ins ------------------------------------------------------

def _v1_event(kind, name, t0, t1, children=(), **fields):
    """A 1.13 event: `extra_fields` of the class PyTorch binds for `kind`, no `typed`."""
    return _Obj(extra_fields=_FIELDS[kind](**fields), name=name, start_time_ns=t0, end_time_ns=t1, start_tid=1,
                children=list(children))


def _v1_md(impl, ptr):
    return _Obj(impl_ptr=impl, storage_data_ptr=ptr, device=torch.device("cpu"), dtype=torch.float32,
                layout=torch.strided)


class V1Test(unittest.TestCase):
    def test_inputs_of_unequal_lengths(self):
        # 1.13's _Inputs holds parallel lists, one entry per argument (of
        # equal length in every real profile: the quick path). Shorter lists
        # take the general path: the missing entries are "not captured".
        def op(name, t0, **inputs):
            return _v1_event(_EventType.TorchOp, name, t0, t0 + 1, inputs=_Obj(**inputs),
                             scope=_Scope.FUNCTION, sequence_number=3)

        full = dict(dtypes=["float", "Scalar", "Scalar", "Scalar", "", "TensorList", "Scalar"],
                    tensor_metadata=[_v1_md(10, 100), None, None, None, None, None, None],
                    shapes=[[2, 3], [], [], [], [], [], []], strides=[[3, 1], [], [], [], [], [], []],
                    ivalues=[None, 2, True, float("nan"), None, None, 0.5])
        short = dict(full, tensor_metadata=[_v1_md(10, 100)], ivalues=[None, 2, True, float("nan")],
                     shapes=[[2, 3]], strides=[])
        alloc = _v1_event(_EventType.Allocation, "[memory]", 20, 20, ptr=100, alloc_size=24,
                          device=torch.device("cpu"), total_allocated=24, total_reserved=0, id=1)
        lines = _records([op("aten::foo", 1, **full), op("aten::foo", 5, **short), alloc])
        self.assertFalse(lines[0]["ids"])
        tensor = {"impl": 10, "ptr": 100, "id": None, "aid": None, "dev": "cpu", "dtype": "float32",
                  "layout": "strided", "sizes": [2, 3], "strides": [3, 1]}
        self.assertEqual(lines[1]["args"], [tensor, {"int": 2}, {"bool": True}, {"float": "nan"}, None,
                                            {"list": []}, {"float": 0.5}])
        self.assertEqual(lines[2]["args"], [dict(tensor, strides=[]), {"int": 2}, {"bool": True},
                                            {"float": "nan"}, None, {"list": []}, None])
        self.assertEqual((lines[1]["scope"], lines[1]["seq"]), ("function", 3))
        self.assertEqual((lines[3]["k"], lines[3]["id"], lines[3]["dev"]), ("alloc", None, "cpu"))


if __name__ == "__main__":
    unittest.main()
