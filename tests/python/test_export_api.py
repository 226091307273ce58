"""memtl's Python API beyond the drop-in export (issue #32): the model's
own names (model=), a model that is no nn.Module or was not profiled, and
exports that walk a profile once.

MEMTL_BIN names the memtl binary (default build/cli/memtl)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_recorder import MEMTL, V2, read_lines, recorder, small_step, torch  # noqa: E402

import memtl  # noqa: E402


@unittest.skipUnless(os.path.exists(MEMTL), "memtl binary not built")
class ExportApiTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def peak_json(self, trace):
        r = subprocess.run([MEMTL, "peak", trace, "--format", "json", "--top", "100"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_model_names_parameters_gradients_and_state(self):
        """With model=, every parameter, gradient and optimizer state at the
        peak is named as named_parameters() names it (1.13 and 2.x alike);
        without it, by the tracer's module path."""
        prof, model = small_step(with_model=True)
        names = {n for n, _ in model.named_parameters()}
        trace = os.path.join(self.dir.name, "m.trace.jsonl")
        memtl.save(prof, trace, model=model)
        header = read_lines(trace)[0]
        self.assertEqual({p["name"] for p in header["model"]}, names)
        self.assertEqual(header["script"], os.path.basename(sys.modules["__main__"].__file__ or sys.argv[0]))
        self.assertIn("T", header["recorded_at"])
        state = [t for t in self.peak_json(trace)["largest"]
                 if t["category"] in ("PARAMETER", "GRADIENT", "OPTIMIZER_STATE")]
        self.assertGreaterEqual(len(state), 8)
        for t in state:
            base = t["name"].split(" ")[0]
            self.assertIn(base, names, t)
            suffix = {"PARAMETER": "", "GRADIENT": " grad"}.get(t["category"])
            if suffix is not None:
                self.assertEqual(t["name"], base + suffix)
            else:  # 2.x names the state's key; 1.13's tracer does not say it
                self.assertEqual(t["name"], base + (" momentum_buffer" if V2 else " state"))
        plain = os.path.join(self.dir.name, "p.trace.jsonl")
        memtl.save(prof, plain)
        for t in self.peak_json(plain)["largest"]:
            if t["category"] == "PARAMETER":
                self.assertRegex(t["name"], r"^Sequential_0 > Linear_[01] \.(weight|bias)$")

    def test_model_that_is_not_a_module_or_not_profiled(self):
        """A model= that is no nn.Module warns and the trace is still
        written; a model whose parameters the profile never saw warns through
        the export's note."""
        # The profiled model stays alive: a model made after it was freed
        # could sit at its parameters' addresses (the match is by storage).
        prof, _model = small_step(with_model=True)
        trace = os.path.join(self.dir.name, "w.trace.jsonl")
        with self.assertWarnsRegex(UserWarning, "model= takes a torch.nn.Module, not dict"):
            memtl.save(prof, trace, model={"not": "a module"})
        self.assertNotIn("model", read_lines(trace)[0])
        other = torch.nn.Linear(3, 3)
        with self.assertWarnsRegex(UserWarning, "has no parameter in the profile"):
            memtl.export_memory_timeline(prof, os.path.join(self.dir.name, "w.json"), model=other)
        self.assertTrue(os.path.getsize(os.path.join(self.dir.name, "w.json")) > 0)

    def test_exports_walk_the_profile_once(self):
        """A list of paths, and later exports of the same profile, reuse one
        walk; another model walks again. The report names the script and the
        time of the run, not the temporary trace."""
        prof, model = small_step(with_model=True)
        walks = []
        saved = recorder.write_events

        def counting(*args, **kw):
            walks.append(1)
            return saved(*args, **kw)

        recorder.write_events = counting
        try:
            html = os.path.join(self.dir.name, "t.html")
            memtl.export_memory_timeline(prof, [html, os.path.join(self.dir.name, "t.json")])
            self.assertEqual(len(walks), 1)
            memtl.export_memory_timeline(prof, os.path.join(self.dir.name, "t.raw.json.gz"))
            self.assertEqual(len(walks), 1)
            memtl.export_memory_timeline(prof, os.path.join(self.dir.name, "m.json"), model=model)
            self.assertEqual(len(walks), 2)
        finally:
            recorder.write_events = saved
        for name in ("t.html", "t.json", "t.raw.json.gz", "m.json"):
            self.assertTrue(os.path.getsize(os.path.join(self.dir.name, name)) > 0, name)
        with open(html, encoding="utf-8") as f:
            page = f.read()
        script = os.path.basename(sys.modules["__main__"].__file__ or sys.argv[0])
        self.assertIn("From <b>%s, recorded " % script, page)
        self.assertNotIn("run.trace.jsonl", page)
        self.assertNotIn(tempfile.gettempdir() + "/memtl_", page)


if __name__ == "__main__":
    unittest.main()
