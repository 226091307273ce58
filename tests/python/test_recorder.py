"""Tests of the PyTorch recorder (python/memtl/_recorder.py) on real profiles,
with Debian's torch 1.13 and with torch 2.x (stand-in objects:
test_recorder_standins.py; the native walk:
test_recorder_native.py).

Run from the repository root: /usr/bin/python3 -m unittest discover -s tests/python
MEMTL_BIN names the memtl binary for the end-to-end tests (default build/cli/memtl).
"""

import gzip
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
import unittest
import zlib

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))  # the source tree's package
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import memtl  # noqa: E402
from memtl import _recorder as recorder  # noqa: E402
from trace_format import check_trace  # noqa: E402

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


def small_step(with_model=False):
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.ones((3, 4))
    with profile() as prof:
        model(x).sum().backward()
        opt.step()
    return (prof, model) if with_model else prof


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

    def test_records_follow_the_format(self):
        # The format checks that every writer's output passes (trace_format.py):
        # this walk's here, the native walk's in test_recorder_native.py.
        prof, model = small_step(with_model=True)
        recorder.save(prof, self.path("a.trace.jsonl.gz"), model=model)
        self.assertEqual(check_trace(self.path("a.trace.jsonl.gz")), [])

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

    def test_links_to_nothing_yet_and_pipes_as_the_command_writes_them(self):
        # As memtl's -o: a link whose end does not exist yet is followed and
        # its end created (the link stays); a named pipe is written in place
        # and stays a pipe (it was replaced by a regular file).
        os.symlink("end.trace.jsonl", self.path("dangling.trace.jsonl"))
        recorder.save(small_step(), self.path("dangling.trace.jsonl"))
        self.assertTrue(os.path.islink(self.path("dangling.trace.jsonl")))
        self.assertEqual(read_lines(self.path("end.trace.jsonl"))[0]["format"], "memtl-trace")
        fifo = self.path("pipe.trace.jsonl.gz")
        os.mkfifo(fifo)
        got = []
        reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
        reader.start()
        recorder.save(small_step(), fifo)
        reader.join(60)
        self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
        self.assertEqual(strict_loads(gzip.decompress(got[0]).split(b"\n")[0])["format"],
                         "memtl-trace")
        with self.assertRaises(IsADirectoryError):
            recorder.save(small_step(), self.dir.name)

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
        # save's header adds the script and the time of the save (each save's
        # own second); the rest is the same bytes.
        def without_time(data):
            head, _, rest = data.partition(b"\n")
            fields = strict_loads(head)
            self.assertIn("recorded_at", fields)
            fields.pop("recorded_at")
            fields.pop("script", None)
            return fields, rest
        self.assertEqual(without_time(text), (strict_loads(out.getvalue().split("\n", 1)[0]),
                                              out.getvalue().split("\n", 1)[1].encode("utf-8")))
        with open(self.path("m.trace.jsonl"), "rb") as f:
            self.assertEqual(without_time(f.read()), without_time(text))
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
        # The message names the user's output, not the deleted temporary trace.
        self.assertIn("the profile recorded for %s" % os.path.join(self.dir.name, "t.json"), str(cm.exception))
        self.assertNotIn("run.trace.jsonl", str(cm.exception))

    def test_other_live_python_threads(self):
        """Profiles taken while other Python threads are alive (the fixture
        scenarios of collect/torch/record_fixtures.py's "threads" group) export
        through the drop-in function. torch 2.x's tracer records those
        threads' stacks under thread id 2^64-1, which the trace keeps as is;
        1.13 traces the profiling thread only."""
        sys.path.insert(0, os.path.join(ROOT, "collect", "torch"))
        import record_fixtures
        for s in record_fixtures.SCENARIOS:
            if s.group != "threads":
                continue
            with self.subTest(s.name):
                prof = record_fixtures.run(s)
                out = os.path.join(self.dir.name, s.name + ".json")
                memtl.export_memory_timeline(prof, out)
                with open(out) as f:
                    times, sizes = json.load(f)
                self.assertEqual(len(times), len(sizes))
                trace = os.path.join(self.dir.name, s.name + ".trace.jsonl")
                memtl.save(prof, trace)
                tids = {r["tid"] for r in read_lines(trace)[1:] if "tid" in r}
                if V2:
                    self.assertIn(2**64 - 1, tids)
                else:
                    self.assertNotIn(2**64 - 1, tids)

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
