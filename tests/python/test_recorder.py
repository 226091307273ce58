"""Tests of the PyTorch recorder (collect/torch/memtl_torch.py) with Debian's
torch 1.13, plus the PyTorch >= 2.0 path on faithful stand-in objects.

Run from the repository root: /usr/bin/python3 -m unittest discover -s tests/python
MEMTL_BIN names the memtl binary for the end-to-end tests (default build/cli/memtl).
"""

import enum
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "collect", "torch"))

import torch  # noqa: E402

import memtl_torch  # noqa: E402

MEMTL = os.environ.get("MEMTL_BIN", os.path.join(ROOT, "build", "cli", "memtl"))


def profile(**kw):
    args = dict(record_shapes=True, profile_memory=True, with_stack=True)
    args.update(kw)
    return torch.profiler.profile(**args)


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f]


def small_step():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.ones((3, 4))
    with profile() as prof:
        model(x).sum().backward()
        opt.step()
    return prof


class SaveTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_gzip_and_plain_hold_the_same_records(self):
        prof = small_step()
        memtl_torch.save(prof, self.path("a.trace.jsonl.gz"))
        memtl_torch.save(prof, self.path("a.trace.jsonl"))
        with open(self.path("a.trace.jsonl.gz"), "rb") as f:
            self.assertEqual(f.read(2), b"\x1f\x8b")
        gz = read_lines(self.path("a.trace.jsonl.gz"))
        plain = read_lines(self.path("a.trace.jsonl"))
        self.assertEqual(gz, plain)
        header = gz[0]
        self.assertEqual(header["format"], "memtl-trace")
        self.assertEqual(header["version"], 1)
        self.assertFalse(header["ids"])  # torch 1.13 gives no ids
        self.assertIn("cpu", header["devices"])

    def test_records_are_preorder_with_parents_first(self):
        prof = small_step()
        memtl_torch.save(prof, self.path("a.trace.jsonl"))
        records = [r for r in read_lines(self.path("a.trace.jsonl"))[1:] if r["k"] != "schema"]
        kinds = {r["k"] for r in records}
        self.assertTrue({"op", "alloc", "py"} <= kinds)
        for n, r in enumerate(records):
            self.assertEqual(r["i"], n)
            self.assertLess(r["p"], n)
        modules = [r for r in records if r["k"] == "py" and "module" in r]
        self.assertEqual([m["module"]["cls"] for m in modules], ["Sequential", "Linear", "ReLU", "Linear"])
        self.assertEqual([p["name"] for p in modules[1]["module"]["params"]], ["weight", "bias"])
        self.assertIn("ptr", modules[1]["module"]["params"][0]["t"])
        optimizers = [r for r in records if r["k"] == "py" and "optimizer" in r]
        self.assertTrue(optimizers)
        self.assertEqual(len(optimizers[0]["optimizer"]["params"]), 4)
        self.assertEqual({s[0] for s in optimizers[0]["optimizer"]["state"]}, {"momentum_buffer"})

    def test_tensor_lists_and_schemas(self):
        x, y = torch.ones((2,)), torch.ones((2,))
        with profile() as prof:
            torch.cat([x, y])
        memtl_torch.save(prof, self.path("cat.trace.jsonl"))
        lines = read_lines(self.path("cat.trace.jsonl"))
        cat = [r for r in lines[1:] if r["k"] == "op" and r["name"] == "aten::cat"][0]
        self.assertEqual(cat["args"][0], {"list": []})  # 1.13 does not capture the elements
        self.assertEqual(cat["args"][1], {"int": 0})
        schemas = {r["op"]: r["schemas"] for r in lines[1:] if r["k"] == "schema"}
        self.assertIn("aten::cat(Tensor[] tensors, int dim=0) -> Tensor", schemas["aten::cat"])

    def test_missing_settings_are_named(self):
        for missing in ("profile_memory", "record_shapes", "with_stack"):
            with profile(**{missing: False}) as prof:
                torch.ones((2,)).mul(2)
            with self.assertRaises(memtl_torch.RecorderError) as cm:
                memtl_torch.save(prof, self.path("x.trace.jsonl"))
            self.assertIn(missing + "=True", str(cm.exception))
            self.assertFalse(os.path.exists(self.path("x.trace.jsonl")))

    def test_profiler_that_never_ran(self):
        prof = torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True)
        with self.assertRaises(memtl_torch.RecorderError) as cm:
            memtl_torch.save(prof, self.path("x.trace.jsonl"))
        self.assertIn("never ran", str(cm.exception))

    def test_failed_write_leaves_no_file(self):
        prof = small_step()
        target = self.path("y.trace.jsonl")
        original = memtl_torch.write_events

        def failing(*args, **kwargs):
            original(*args, **kwargs)
            raise OSError("disk full")

        memtl_torch.write_events = failing
        try:
            with self.assertRaises(OSError):
                memtl_torch.save(prof, target)
        finally:
            memtl_torch.write_events = original
        self.assertEqual(os.listdir(self.dir.name), [])
        with self.assertRaises(OSError):
            memtl_torch.save(prof, self.path("no/such/dir/z.trace.jsonl"))

    def test_scalars(self):
        self.assertEqual(memtl_torch._scalar(float("nan")), '{"float":"nan"}')
        self.assertEqual(memtl_torch._scalar(float("-inf")), '{"float":"-inf"}')
        self.assertEqual(memtl_torch._scalar(True), '{"bool":true}')
        self.assertEqual(memtl_torch._scalar(3), '{"int":3}')
        self.assertEqual(memtl_torch._scalar(0.5), '{"float":0.5}')
        self.assertEqual(memtl_torch._scalar(1 + 2j), '{"complex":[1.0,2.0]}')
        self.assertEqual(memtl_torch._scalar("floor"), '{"str":"floor"}')
        self.assertEqual(memtl_torch._scalar(None), "null")


# ---- PyTorch >= 2.0 stand-ins -------------------------------------------------

class _EventType(enum.Enum):
    TorchOp = 0
    Allocation = 2
    PyCall = 4


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
    return _Obj(typed=(kind, fields), name=name, start_time_ns=t0, end_time_ns=t1, start_tid=1,
                children=list(children))


class V2Test(unittest.TestCase):
    def test_v2_events_carry_ids(self):
        w, g, buf = _TM(10, 100, 0, 1), _TM(11, 200, 1, 2), _TM(12, 300, 2, 3)
        alloc = _event(_EventType.Allocation,
                       _Obj(ptr=400, id=3, allocation_id=4, alloc_size=16, device=torch.device("cpu"),
                            total_allocated=16, total_reserved=0), "[memory]", 5, 5)
        op = _event(_EventType.TorchOp,
                    _Obj(inputs=[w, [g, None], 2.5, None, True], scope=_Scope.FUNCTION, sequence_number=-1),
                    "aten::foo", 2, 9, [alloc])
        module = _event(_EventType.PyCall,
                        _Obj(module=_Obj(self_ptr=77, cls_name="Linear", parameters=[("weight", w, g)]),
                             optimizer=None), "nn.Module: Linear_0", 1, 10, [op])
        opt = _event(_EventType.PyCall,
                     _Obj(module=None, optimizer=_Obj(self_ptr=88, parameters=[(w, g, [("momentum_buffer", buf)])])),
                     "Optimizer.step", 11, 12)
        out = io.StringIO()
        n, allocs = memtl_torch.write_events([module, opt], out, "2.1.0")
        self.assertEqual((n, allocs), (4, 1))
        lines = [json.loads(x) for x in out.getvalue().splitlines()]
        self.assertTrue(lines[0]["ids"])
        m, o, a, s = lines[1], lines[2], lines[3], lines[4]
        self.assertEqual(m["module"]["self"], 77)
        self.assertEqual(m["module"]["params"][0]["t"]["aid"], 1)
        self.assertEqual(m["module"]["params"][0]["grad"]["id"], 1)
        self.assertEqual(o["p"], 0)
        self.assertEqual(o["args"][0]["impl"], 10)
        self.assertEqual(o["args"][1]["list"][0]["aid"], 2)
        self.assertIsNone(o["args"][1]["list"][1])
        self.assertEqual(o["args"][2:], [{"float": 2.5}, None, {"bool": True}])
        self.assertEqual((a["k"], a["p"], a["id"], a["aid"]), ("alloc", 1, 3, 4))
        self.assertEqual(s["optimizer"]["params"][0]["state"][0][0], "momentum_buffer")
        self.assertEqual(s["optimizer"]["params"][0]["state"][0][1]["aid"], 3)


# ---- End to end with the memtl binary ----------------------------------------------

@unittest.skipUnless(os.path.exists(MEMTL), "memtl binary not built")
class EndToEndTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def test_fresh_profile_gives_a_valid_graph(self):
        x = torch.ones((1,))
        w = torch.ones((1,), requires_grad=True)
        with profile() as prof:
            (x * w).sin().backward()
        path = os.path.join(self.dir.name, "fresh.trace.jsonl.gz")
        memtl_torch.save(prof, path)
        r = subprocess.run([MEMTL, "graph", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "aten::mul                 T0(v0), T1(v0)   ->  T2(v0)")
        self.assertIn("AccumulateGrad            T7(v0)           ->", lines)

    def test_drop_in_export_memory_timeline(self):
        prof = small_step()
        for name in ("t.html", "t.raw.json.gz", "t.json.gz", "t.json"):
            out = os.path.join(self.dir.name, name)
            memtl_torch.export_memory_timeline(prof, out)
            self.assertTrue(os.path.getsize(out) > 0, name)
        with open(os.path.join(self.dir.name, "t.json")) as f:
            times, sizes = json.load(f)
        self.assertEqual(len(times), len(sizes))
        self.assertEqual(len(sizes[0]), 9)
        with gzip.open(os.path.join(self.dir.name, "t.raw.json.gz"), "rt") as f:
            raw = json.load(f)
        self.assertTrue(all(len(row) == 4 for row in raw))
        with self.assertRaises(RuntimeError) as cm:
            memtl_torch.export_memory_timeline(prof, os.path.join(self.dir.name, "t.json"), device="cuda:0")
        self.assertIn("cuda:0", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
