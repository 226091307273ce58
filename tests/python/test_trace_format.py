"""The format checks of trace_format.py: every memtl trace the recorders
wrote under fixtures/ and docs/ follows the format, and the checks refuse
what breaks it (so that a writer's test that passes them means something).
The recorders' own outputs are checked in test_recorder.py (the Python
walk, on the torch running the tests) and test_recorder_native.py (the
native 1.13 walk).

Run from the repository root: python3 -m pytest tests/python/test_trace_format.py
"""

import glob
import json
import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from trace_format import check_lines, check_trace  # noqa: E402

HEADER = {"format": "memtl-trace", "version": 1, "producer": "test", "ids": False, "devices": ["cpu"]}
TENSOR = {"impl": 1, "ptr": 64, "id": None, "aid": None, "dev": "cpu", "dtype": "float32", "layout": "strided",
          "sizes": [2, 2], "strides": [2, 1]}
OP = {"k": "op", "i": 0, "p": -1, "name": "aten::mul", "t0": 10, "t1": 20, "tid": 1, "scope": "function", "seq": -1,
      "args": [TENSOR, None, {"list": [TENSOR, None]}, {"bool": True}, {"int": 3}, {"float": "nan"},
               {"complex": [1.0, 0.5]}, {"str": "floor"}]}
ALLOC = {"k": "alloc", "i": 1, "p": 0, "t": 15, "tid": 1, "ptr": 64, "bytes": 16, "dev": "cpu",
         "total_allocated": 16, "total_reserved": 0, "id": None, "aid": None}
PY = {"k": "py", "i": 2, "p": -1, "name": "nn.Module: Linear_0", "t0": 30, "t1": 40, "tid": 1, "line": 7,
      "module": {"self": None, "cls": "Linear", "params": [{"name": "weight", "t": {"ptr": 64}, "grad": None}]}}
SCHEMA = {"k": "schema", "op": "aten::mul", "schemas": ["aten::mul.Tensor(Tensor self, Tensor other) -> Tensor"]}


def lines(*records, header=None):
    return [json.dumps(r) + "\n" for r in (header or HEADER,) + records]


def with_(record, **changes):
    r = json.loads(json.dumps(record))
    for k, v in changes.items():
        if v is ...:
            del r[k]
        else:
            r[k] = v
    return r


class FormatChecksTest(unittest.TestCase):
    def test_fixtures_follow_the_format(self):
        paths = sorted(glob.glob(os.path.join(ROOT, "fixtures", "**", "*.trace.jsonl*"), recursive=True) +
                       glob.glob(os.path.join(ROOT, "docs", "*.trace.jsonl*")))
        self.assertGreater(len(paths), 50)
        for path in paths:
            with self.subTest(path=os.path.relpath(path, ROOT)):
                self.assertEqual(check_trace(path), [])

    def test_a_good_trace_passes(self):
        self.assertEqual(check_lines(lines(OP, ALLOC, PY, SCHEMA)), [])

    def test_the_checks_refuse(self):
        bad = {
            "no header format": lines(OP, header=with_(HEADER, format="other")),
            "a newer version": lines(OP, header=with_(HEADER, version=2)),
            "an index out of order": lines(with_(OP, i=1)),
            "a parent after the child": lines(with_(OP, p=0)),
            "a parent off the path": lines(OP, with_(ALLOC, p=-1), with_(PY, p=0)),
            "an unknown kind": lines(with_(OP, k="event")),
            "an unknown scope": lines(with_(OP, scope="Function")),
            "an op without args": lines(with_(OP, args=...)),
            "a tensor without impl in args": lines(with_(OP, args=[{"ptr": 64}])),
            "a partial tensor with ids": lines(PY, header=with_(HEADER, ids=True)),
            "an unknown dtype": lines(with_(OP, args=[with_(TENSOR, dtype="float")])),
            "a negative size": lines(with_(OP, args=[with_(TENSOR, sizes=[-1])])),
            "a device that is none": lines(with_(OP, args=[with_(TENSOR, dev="gpu0")])),
            "an argument of two keys": lines(with_(OP, args=[{"int": 1, "bool": True}])),
            "a float that is a string": lines(with_(OP, args=[{"float": "1.5"}])),
            "too many bytes": lines(OP, with_(ALLOC, bytes=1 << 47)),
            "a line out of range": lines(OP, ALLOC, with_(PY, line=1 << 30)),
            "a module and an optimizer": lines(OP, ALLOC, with_(PY, optimizer={"self": None, "params": []})),
            "a schema twice": lines(OP, SCHEMA, SCHEMA),
            "NaN as JSON": ['{"format":"memtl-trace","version":1,"producer":"t","ids":false,"devices":[]}\n',
                            '{"k":"op","i":0,"p":-1,"name":"a","t0":NaN,"tid":1,"scope":"function","seq":-1,'
                            '"args":[]}\n'],
        }
        for what, trace in bad.items():
            with self.subTest(what):
                self.assertNotEqual(check_lines(trace), [])


if __name__ == "__main__":
    unittest.main()
