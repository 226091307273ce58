"""Tests of the PyTorch recorder (python/memtl/_recorder.py) with Debian's
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
import zlib

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the source tree's package

import torch  # noqa: E402

import memtl  # noqa: E402
from memtl import _recorder as recorder  # noqa: E402

# PyTorch >= 2.0: events are `typed`, tensors carry the producer's ids, tensor
# lists are captured and optimizer state is attributed to parameters.
V2 = int(torch.__version__.split(".")[0]) >= 2

MEMTL = os.environ.get("MEMTL_BIN", os.path.join(ROOT, "build", "cli", "memtl"))


def profile(**kw):
    args = dict(record_shapes=True, profile_memory=True, with_stack=True)
    args.update(kw)
    return torch.profiler.profile(**args)


def _reject_constant(name):
    raise ValueError("non-standard JSON constant %s" % name)


def strict_loads(line):
    """json.loads that rejects NaN/Infinity, as memtl's reader does."""
    return json.loads(line, parse_constant=_reject_constant)


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [strict_loads(line) for line in f]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
        recorder.save(prof, self.path("a.trace.jsonl.gz"))
        recorder.save(prof, self.path("a.trace.jsonl"))
        with open(self.path("a.trace.jsonl.gz"), "rb") as f:
            self.assertEqual(f.read(2), b"\x1f\x8b")
        gz = read_lines(self.path("a.trace.jsonl.gz"))
        plain = read_lines(self.path("a.trace.jsonl"))
        self.assertEqual(gz, plain)
        header = gz[0]
        self.assertEqual(header["format"], "memtl-trace")
        self.assertEqual(header["version"], 1)
        self.assertEqual(header["ids"], V2)  # torch 1.13 gives no ids
        self.assertIn("cpu", header["devices"])

    def test_records_are_preorder_with_parents_first(self):
        prof = small_step()
        recorder.save(prof, self.path("a.trace.jsonl"))
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
        if V2:  # state per parameter, with the module's own objects
            self.assertEqual([p["state"][0][0] for p in optimizers[0]["optimizer"]["params"]],
                             ["momentum_buffer"] * 4)
            self.assertEqual(modules[1]["module"]["params"][0]["t"]["id"],
                             optimizers[0]["optimizer"]["params"][0]["t"]["id"])
            self.assertIsInstance(modules[1]["module"]["self"], int)
        else:  # 1.13 lists the state flat
            self.assertEqual({s[0] for s in optimizers[0]["optimizer"]["state"]}, {"momentum_buffer"})

    def test_tensor_lists_and_schemas(self):
        x, y = torch.ones((2,)), torch.ones((2,))
        with profile() as prof:
            torch.cat([x, y])
        recorder.save(prof, self.path("cat.trace.jsonl"))
        lines = read_lines(self.path("cat.trace.jsonl"))
        cat = [r for r in lines[1:] if r["k"] == "op" and r["name"] == "aten::cat"][0]
        if V2:
            self.assertEqual([t["ptr"] for t in cat["args"][0]["list"]],
                             [x.untyped_storage().data_ptr(), y.untyped_storage().data_ptr()])
            self.assertEqual(len({t["id"] for t in cat["args"][0]["list"]}), 2)
        else:
            self.assertEqual(cat["args"][0], {"list": []})  # 1.13 does not capture the elements
        self.assertEqual(cat["args"][1], {"int": 0})
        schemas = {r["op"]: r["schemas"] for r in lines[1:] if r["k"] == "schema"}
        self.assertIn("aten::cat(Tensor[] tensors, int dim=0) -> Tensor", schemas["aten::cat"])

    def test_missing_settings_are_named(self):
        for missing in ("profile_memory", "record_shapes", "with_stack"):
            with profile(**{missing: False}) as prof:
                torch.ones((2,)).mul(2)
            with self.assertRaises(recorder.RecorderError) as cm:
                recorder.save(prof, self.path("x.trace.jsonl"))
            self.assertIn(missing + "=True", str(cm.exception))
            self.assertFalse(os.path.exists(self.path("x.trace.jsonl")))

    def test_all_missing_settings_are_named_at_once(self):
        with profile(profile_memory=False, with_stack=False) as prof:
            pass
        with self.assertRaises(ValueError) as cm:  # RecorderError is a ValueError
            recorder.save(prof, self.path("x.trace.jsonl"))
        self.assertIn("profile_memory=True, with_stack=True", str(cm.exception))
        self.assertNotIn("without record_shapes", str(cm.exception))

    def test_profiler_that_never_ran(self):
        prof = torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True)
        with self.assertRaises(recorder.RecorderError) as cm:
            recorder.save(prof, self.path("x.trace.jsonl"))
        self.assertIn("never ran", str(cm.exception))

    def test_failed_write_leaves_no_file(self):
        prof = small_step()
        target = self.path("y.trace.jsonl")
        original = recorder.write_events

        def failing(*args, **kwargs):
            original(*args, **kwargs)
            raise OSError("disk full")

        recorder.write_events = failing
        try:
            with self.assertRaises(OSError):
                recorder.save(prof, target)
        finally:
            recorder.write_events = original
        self.assertEqual(os.listdir(self.dir.name), [])
        with self.assertRaises(OSError):
            recorder.save(prof, self.path("no/such/dir/z.trace.jsonl"))

    def test_event_tree_without_a_field_names_torch_and_the_field(self):
        class _Results:
            def __init__(self, results):
                self.results = results

            def experimental_event_tree(self):
                return [_OldEvent(e) for e in self.results.experimental_event_tree()]

        class _OldEvent:
            """A real event as a torch that lacks `start_tid` would bind it."""

            __module__ = "torch._C._profiler"

            def __init__(self, e):
                self._e = e

            def __getattr__(self, name):
                if name == "start_tid":
                    raise AttributeError(name, name=name, obj=self)
                value = getattr(self._e, name)
                return [_OldEvent(c) for c in value] if name == "children" else value

        prof = small_step()
        prof.profiler.kineto_results = _Results(prof.profiler.kineto_results)
        with self.assertRaises(recorder.RecorderError) as cm:
            recorder.save(prof, self.path("old.trace.jsonl"))
        self.assertIn("torch %s" % torch.__version__, str(cm.exception))
        self.assertIn("'start_tid'", str(cm.exception))
        self.assertEqual(os.listdir(self.dir.name), [])

    def test_unwritable_folder_names_the_users_path(self):
        prof = small_step()
        path = self.path("missing/run.trace.jsonl")
        with self.assertRaises(OSError) as cm:
            recorder.save(prof, path)
        self.assertIn(path, str(cm.exception))
        self.assertNotIn(".tmp", str(cm.exception))

    def test_gzip_header_names_the_final_file(self):
        prof = small_step()
        recorder.save(prof, self.path("named.trace.jsonl.gz"))
        with open(self.path("named.trace.jsonl.gz"), "rb") as f:
            head = f.read(64)
        self.assertEqual(head[3] & 0x08, 0x08)  # FNAME present
        name = head[10:head.index(b"\0", 10)]
        self.assertEqual(name, b"named.trace.jsonl")  # not the temporary file's name

    def test_header_states_the_settings(self):
        prof = small_step()
        recorder.save(prof, self.path("s.trace.jsonl"))
        header = read_lines(self.path("s.trace.jsonl"))[0]
        for k in ("record_shapes", "profile_memory", "with_stack"):
            self.assertIs(header[k], True)
        self.assertEqual(header["torch_version"], torch.__version__)
        self.assertEqual(header["producer"], "memtl_torch 0.1")

    def test_tensor_args_of_a_real_op(self):
        x = torch.ones((2, 3))
        y = torch.ones((2, 3), dtype=torch.float64)
        with profile() as prof:
            x.add(y, alpha=2)
        recorder.save(prof, self.path("add.trace.jsonl"))
        lines = read_lines(self.path("add.trace.jsonl"))
        add = [r for r in lines[1:] if r["k"] == "op" and r["name"] == "aten::add"][0]
        a, b, alpha = add["args"]
        self.assertEqual((a["dtype"], a["dev"], a["layout"], a["sizes"], a["strides"]),
                         ("float32", "cpu", "strided", [2, 3], [3, 1]))
        self.assertEqual(b["dtype"], "float64")
        self.assertEqual(a["ptr"], x.storage().data_ptr())
        self.assertEqual(b["ptr"], y.storage().data_ptr())
        if V2:  # the producer's ids: distinct tensors, distinct ids
            self.assertNotEqual((a["id"], a["aid"]), (b["id"], b["aid"]))
            self.assertIsInstance(a["id"], int)
        else:
            self.assertIsNone(a["id"])  # 1.13: ids are recycled, never written
            self.assertIsNone(a["aid"])
        self.assertNotEqual(a["impl"], 0)
        self.assertEqual(alpha, {"int": 2})
        self.assertEqual(add["scope"], "function")
        self.assertIsInstance(add["seq"], int)
        self.assertLessEqual(add["t0"], add["t1"])

    def test_nan_inf_and_complex_scalars_in_a_real_profile(self):
        with profile() as prof:
            torch.full((2,), float("nan"))
            torch.full((2,), float("-inf"))
            torch.full((2,), 1 + 2j)
        recorder.save(prof, self.path("full.trace.jsonl.gz"))
        lines = read_lines(self.path("full.trace.jsonl.gz"))  # strict: no bare NaN
        fills = [r["args"][1] for r in lines[1:] if r["k"] == "op" and r["name"] == "aten::full"]
        self.assertEqual(fills, [{"float": "nan"}, {"float": "-inf"}, {"complex": [1.0, 2.0]}])

    def test_empty_profile_is_a_valid_trace(self):
        # A legitimately tiny run: the settings are on, so no allocation is no error.
        with profile() as prof:
            pass
        recorder.save(prof, self.path("empty.trace.jsonl"))
        lines = read_lines(self.path("empty.trace.jsonl"))
        self.assertEqual(lines[0]["devices"], [])
        self.assertFalse([r for r in lines[1:] if r["k"] in ("alloc", "op")])

    def test_autograd_profiler_object(self):
        with torch.autograd.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True) as prof:
            torch.ones((2,)).mul(2)
        recorder.save(prof, self.path("ag.trace.jsonl"))
        self.assertTrue(read_lines(self.path("ag.trace.jsonl"))[0]["profile_memory"])
        with torch.autograd.profiler.profile(record_shapes=True, profile_memory=False) as prof:
            pass
        with self.assertRaises(recorder.RecorderError) as cm:
            recorder.save(prof, self.path("ag2.trace.jsonl"))
        self.assertIn("profile_memory=True", str(cm.exception))

    def test_save_inside_the_profiling_block(self):
        with profile() as prof:
            with self.assertRaises(recorder.RecorderError) as cm:
                recorder.save(prof, self.path("x.trace.jsonl"))
        self.assertIn("after the profiling block", str(cm.exception))

    def test_failed_save_keeps_the_previous_file(self):
        target = self.path("keep.trace.jsonl")
        with open(target, "w") as f:
            f.write("previous\n")
        original = recorder.write_events

        def failing(roots, out, *args, **kwargs):
            out.write("partial")
            raise RuntimeError("interrupted")

        recorder.write_events = failing
        try:
            with self.assertRaises(RuntimeError):
                recorder.save(small_step(), target)
        finally:
            recorder.write_events = original
        with open(target) as f:
            self.assertEqual(f.read(), "previous\n")
        self.assertEqual(os.listdir(self.dir.name), ["keep.trace.jsonl"])

    def test_no_name_exists_while_writing_and_links_are_followed(self):
        # While the trace is written nothing is in the folder (an unnamed
        # file: a run killed then, by SIGKILL too, leaves nothing); a
        # symbolic link's target is replaced and the link stays.
        seen = []
        original = recorder.write_events

        def watching(roots, out, *args, **kwargs):
            seen.append(sorted(os.listdir(self.dir.name)))
            return original(roots, out, *args, **kwargs)

        os.symlink("real.trace.jsonl", self.path("link.trace.jsonl"))
        with open(self.path("real.trace.jsonl"), "w") as f:
            f.write("previous\n")
        recorder.write_events = watching
        try:
            recorder.save(small_step(), self.path("new.trace.jsonl"))
            recorder.save(small_step(), self.path("link.trace.jsonl"))
        finally:
            recorder.write_events = original
        self.assertEqual(seen, [["link.trace.jsonl", "real.trace.jsonl"],
                                ["link.trace.jsonl", "new.trace.jsonl", "real.trace.jsonl"]])
        self.assertTrue(os.path.islink(self.path("link.trace.jsonl")))
        self.assertEqual(read_lines(self.path("real.trace.jsonl"))[0]["format"], "memtl-trace")
        self.assertEqual(sorted(os.listdir(self.dir.name)),
                         ["link.trace.jsonl", "new.trace.jsonl", "real.trace.jsonl"])
        self.assertEqual(os.stat(self.path("new.trace.jsonl")).st_mode & 0o777, 0o644 & ~_umask())

    def test_gzip_trace_is_a_header_member_then_the_body(self):
        # save walks the tree once: the body is compressed while the tree is
        # walked, the header (which states what the walk learnt) goes in a
        # gzip member of its own before it. The text is what write_events
        # writes to a text stream, and the plain file holds it too.
        prof = small_step()
        recorder.save(prof, self.path("m.trace.jsonl.gz"))
        recorder.save(prof, self.path("m.trace.jsonl"))
        with open(self.path("m.trace.jsonl.gz"), "rb") as f:
            data = f.read()
        first = zlib.decompressobj(16 + zlib.MAX_WBITS)
        header = first.decompress(data)
        self.assertTrue(first.eof)
        self.assertEqual(header.count(b"\n"), 1)
        self.assertTrue(header.endswith(b"\n"))
        self.assertEqual(strict_loads(header)["format"], "memtl-trace")
        body = first.unused_data
        self.assertEqual(body[:2], b"\x1f\x8b")  # a second member follows
        text = gzip.decompress(data)
        self.assertEqual(text, header + gzip.decompress(body))
        out = io.StringIO()
        recorder.write_events(prof.profiler.kineto_results.experimental_event_tree(), out, torch.__version__,
                                 recorder._schema_lookup(), recorder._settings(prof))
        self.assertEqual(text, out.getvalue().encode("utf-8"))
        with open(self.path("m.trace.jsonl"), "rb") as f:
            self.assertEqual(f.read(), text)
        self.assertEqual(sorted(os.listdir(self.dir.name)), ["m.trace.jsonl", "m.trace.jsonl.gz"])

    def test_scalars(self):
        self.assertEqual(recorder._scalar(float("nan")), '{"float":"nan"}')
        self.assertEqual(recorder._scalar(float("-inf")), '{"float":"-inf"}')
        self.assertEqual(recorder._scalar(True), '{"bool":true}')
        self.assertEqual(recorder._scalar(3), '{"int":3}')
        self.assertEqual(recorder._scalar(0.5), '{"float":0.5}')
        self.assertEqual(recorder._scalar(1 + 2j), '{"complex":[1.0,2.0]}')
        self.assertEqual(recorder._scalar("floor"), '{"str":"floor"}')
        self.assertEqual(recorder._scalar(None), "null")
        self.assertEqual(recorder._scalar(float("inf")), '{"float":"inf"}')
        self.assertEqual(recorder._scalar(complex(float("nan"), float("-inf"))), '{"complex":["nan","-inf"]}')
        self.assertEqual(recorder._scalar(-7), '{"int":-7}')
        self.assertEqual(recorder._scalar('a"b\\'), '{"str":"a\\"b\\\\"}')
        self.assertEqual(recorder._scalar(object()), "null")  # not a form the format carries


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


@unittest.skipUnless(V2, "needs PyTorch >= 2.0")
class RealV2Test(unittest.TestCase):
    """The 2.x path on real profiles of the installed torch."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def save(self, prof):
        path = os.path.join(self.dir.name, "t.trace.jsonl")
        recorder.save(prof, path)
        return read_lines(path)

    def test_ids_are_pytorchs_own(self):
        prof = small_step()
        lines = self.save(prof)
        self.assertTrue(lines[0]["ids"])
        # Every tensor argument and allocation, in pre-order, against the
        # event tree's own _TensorMetadata and allocation fields.
        expected, stack = [], list(reversed(prof.profiler.kineto_results.experimental_event_tree()))
        while stack:
            e = stack.pop()
            kind, f = e.typed
            if kind.name == "TorchOp":
                for i in f.inputs:
                    for t in (i if isinstance(i, list) else [i]):
                        if hasattr(t, "impl_ptr"):
                            expected.append(("t", t.id, t.allocation_id, t.storage_data_ptr or 0))
            elif kind.name == "Allocation":
                expected.append(("a", f.id, f.allocation_id, f.ptr))
            stack.extend(reversed(e.children))
        written = []
        for r in lines[1:]:
            if r["k"] == "op":
                for arg in r["args"]:
                    for t in (arg["list"] if isinstance(arg, dict) and "list" in arg else [arg]):
                        if isinstance(t, dict) and "impl" in t:
                            written.append(("t", t["id"], t["aid"], t["ptr"]))
            elif r["k"] == "alloc":
                written.append(("a", r["id"], r["aid"], r["ptr"]))
        self.assertGreater(len(written), 20)
        self.assertEqual(written, expected)

    def test_kinds_scopes_modules_and_optimizer(self):
        lines = self.save(small_step())
        ops = [r for r in lines[1:] if r["k"] == "op"]
        backward = [r for r in ops if r["scope"] == "backward_function"]
        self.assertTrue(backward)
        self.assertTrue(any(r["name"] == "autograd::engine::evaluate_function: AddmmBackward0" for r in ops))
        self.assertTrue(all(r["t0"] <= r["t1"] for r in ops))
        allocs = [r for r in lines[1:] if r["k"] == "alloc"]
        self.assertTrue(all(isinstance(r["id"], int) or r["id"] is None for r in allocs))
        self.assertTrue(all(isinstance(r["aid"], int) for r in allocs))
        self.assertEqual({r["dev"] for r in allocs}, {"cpu"})
        linear = [r for r in lines[1:] if r["k"] == "py" and r.get("module", {}).get("cls") == "Linear"]
        self.assertEqual(len(linear), 2)
        self.assertEqual([p["name"] for p in linear[0]["module"]["params"]], ["weight", "bias"])
        opt = [r for r in lines[1:] if r["k"] == "py" and "optimizer" in r]
        self.assertEqual(len(opt[0]["optimizer"]["params"]), 4)
        self.assertIsInstance(opt[0]["optimizer"]["self"], int)

    def test_storage_less_tensors_are_written_with_pointer_0(self):
        x = torch.ones((4,))
        with profile() as prof:
            torch.abs(x, out=torch.empty(0))
        lines = self.save(prof)
        outs = [r["args"][1] for r in lines[1:] if r["k"] == "op" and r["name"] == "aten::abs"]
        self.assertTrue(outs)
        self.assertEqual(outs[0]["ptr"], 0)  # PyTorch's storage_data_ptr is None
        self.assertEqual(outs[0]["sizes"], [0])


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


# ---- The native walk (collect/torch/native) --------------------------------------

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
        with opener(native, "rb") as f:
            a = f.read()
        with opener(python, "rb") as f:
            b = f.read()
        self.assertGreater(a.count(b"\n"), 10)
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
        recorder.save(prof, path)
        r = subprocess.run([MEMTL, "graph", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "aten::mul                 T0(v0), T1(v0)   ->  T2(v0)")
        self.assertIn("AccumulateGrad            T7(v0)           ->", lines)

    def test_drop_in_export_memory_timeline(self):
        prof = small_step()
        for name in ("t.html", "t.raw.json.gz", "t.json.gz", "t.json"):
            out = os.path.join(self.dir.name, name)
            memtl.export_memory_timeline(prof, out)
            self.assertTrue(os.path.getsize(out) > 0, name)
        with open(os.path.join(self.dir.name, "t.json")) as f:
            times, sizes = json.load(f)
        self.assertEqual(len(times), len(sizes))
        self.assertEqual(len(sizes[0]), 9)
        with gzip.open(os.path.join(self.dir.name, "t.raw.json.gz"), "rt") as f:
            raw = json.load(f)
        self.assertTrue(all(len(row) == 4 for row in raw))
        with self.assertRaises(RuntimeError) as cm:
            memtl.export_memory_timeline(prof, os.path.join(self.dir.name, "t.json"), device="cuda:0")
        self.assertIn("cuda:0", str(cm.exception))

    def test_unknown_suffix_fails_before_recording(self):
        prof = small_step()
        saved = recorder.write_events
        recorder.write_events = None  # recording would fail with a TypeError
        try:
            with self.assertRaises(ValueError) as cm:
                memtl.export_memory_timeline(prof, os.path.join(self.dir.name, "t.png"))
        finally:
            recorder.write_events = saved
        self.assertIn("t.png: unknown output suffix", str(cm.exception))
        self.assertEqual(os.listdir(self.dir.name), [])

    def test_unwritable_destination_names_the_users_path(self):
        prof = small_step()
        path = os.path.join(self.dir.name, "no", "such", "t.html")
        with self.assertRaises(memtl.ExportError) as cm:
            memtl.export_memory_timeline(prof, path)
        self.assertIn(path, str(cm.exception))
        self.assertEqual(os.listdir(self.dir.name), [])


if __name__ == "__main__":
    unittest.main()
