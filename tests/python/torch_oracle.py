"""PyTorch's own memory profiler as the oracle for memtl's answers.

For a finished torch >= 2.0 profile this module renders, from PyTorch's
objects (torch.profiler._memory_profiler.MemoryProfile), the same four
artifacts memtl produces for the same run:

- the data-flow graph, in the layout `memtl graph` prints (core/graph/
  data_flow.cpp FormatDataFlow, itself the layout of PyTorch's
  test/profiler/test_memory_profiler.py);
- the categorized timeline, in the layout of `memtl categories`
  (core/timeline/timeline.cpp FormatTimeline);
- the `.json` and `.raw.json.gz` exports (MemoryProfileTimeline).

compare() records the profile with memtl.save, runs the memtl command for
the same four artifacts and says where the two sides differ.

PyTorch's code is imported, never copied: it is the specification.
"""

import dataclasses
import difflib
import gzip
import json
import os
import subprocess
import tempfile

import torch
from torch.profiler import _memory_profiler as mp

import memtl

# The names `memtl categories` gives PyTorch's categories; None (no category,
# and every allocation without a TensorKey) prints as "unknown".
_CATEGORY_NAMES = {c: c.name for c in mp.Category}
_CATEGORY_NAMES[None] = "unknown"

# Lines of context shown around the first difference in a failure message.
_CONTEXT = 3
# Differing lines shown at most, so that a broken resnet graph stays readable.
_MAX_DIFF_LINES = 40


def memory_profile(prof):
    """PyTorch's analysis of `prof`, built afresh from the profiler's results
    (not prof._memory_profile(), whose cache a caller may have filled)."""
    return mp.MemoryProfile(prof.profiler.kineto_results)


def _key_text(key, version, deleted=False):
    return "T%d(v%d%s)" % (key.id, version, "*" if deleted else "")


def format_graph(profile):
    """The data-flow graph, one line per node that has an input or an output.

    Inputs are the node's non-allocation edges with the version they read,
    `*` marking the ones the node frees; outputs are the versions it creates.
    Edges come in PyTorch's order (sorted TensorKeys), as memtl keeps them.
    Intermediates (allocated and freed inside the node) show on neither side.
    """
    lines = []
    for node in profile._data_flow_graph.flow_nodes:
        edges = node._edges
        inputs = ", ".join(_key_text(k, v, edges[k].is_deletion) for k, (_, v) in node.inputs.items())
        outputs = ", ".join(_key_text(k, v) for k, v in node.outputs.items())
        if not inputs and not outputs:
            continue
        name = node._event.name.replace("torch::autograd::", "")
        line = "%-25s %-15s  ->  %s" % (name, inputs, outputs)
        lines.append(line.rstrip())
    return "".join(line + "\n" for line in lines)


def _allocation_devices(profile):
    """Device names of the run's allocations: memtl's trace header lists
    these, and `memtl categories` names each line's device when there are
    several."""
    devices = set()
    for event in profile._op_tree.dfs():
        if event.typed[0] == torch._C._profiler._EventType.Allocation:
            devices.add(str(event.typed[1].device))
    return devices


def format_categories(profile):
    """The timeline, one line per MemoryProfile.timeline event: action, the
    (tensor, version) it concerns ("[memory]" for allocations without a
    TensorKey), bytes and category. A version bump that changes the category
    shows both ("unknown -> ACTIVATION")."""
    categories = profile._categories
    several_devices = len(_allocation_devices(profile)) > 1
    out = []
    for _t, action, (key, version), nbytes in profile.timeline:
        if isinstance(key, mp.TensorKey):
            text = _key_text(key, version)
            category = _CATEGORY_NAMES[categories.get(key, version)]
            if action == mp.Action.INCREMENT_VERSION:
                after = _CATEGORY_NAMES[categories.get(key, version + 1)]
                if after != category:
                    category += " -> " + after
        else:
            text, category = "[memory]", "unknown"
        line = "%-18s %-16s %12d B  %s" % (action.name.lower(), text, nbytes, category)
        if several_devices:
            line += "  " + str(key.device)
        out.append(line + "\n")
    return "".join(out)


def export_json(profile, device="cpu"):
    """`[times_us, sizes]` as PyTorch's .json export writes it, parsed."""
    return _export(profile, device, raw=False)


def export_raw(profile, device="cpu"):
    """The raw events as PyTorch's .raw.json.gz export holds them, parsed."""
    return _export(profile, device, raw=True)


def _export(profile, device, raw):
    timeline = mp.MemoryProfileTimeline(profile)
    with tempfile.TemporaryDirectory(prefix="memtl_oracle_") as d:
        path = os.path.join(d, "out.json")
        if raw:
            timeline.export_memory_timeline_raw(path, device)
        else:
            timeline.export_memory_timeline(path, device)
        with open(path) as f:
            return json.load(f)


# ---- memtl's side ----------------------------------------------------------

def _run_memtl(args):
    r = subprocess.run([memtl.binary()] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("memtl %s failed (status %d): %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r.stdout


def _load_export(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def memtl_artifacts(trace, workdir, device="cpu"):
    """memtl's graph, categories, .json and raw exports of a saved trace."""
    json_path = os.path.join(workdir, "out.json")
    raw_path = os.path.join(workdir, "out.raw.json.gz")
    _run_memtl(["export", trace, "-o", json_path, "--device", device])
    _run_memtl(["export", trace, "-o", raw_path, "--device", device])
    return {
        "graph": _run_memtl(["graph", trace]),
        "categories": _run_memtl(["categories", trace]),
        "json": _load_export(json_path),
        "raw": _load_export(raw_path),
    }


def torch_artifacts(prof, device="cpu"):
    """PyTorch's answers for the same four artifacts."""
    profile = memory_profile(prof)
    return {
        "graph": format_graph(profile),
        "categories": format_categories(profile),
        "json": export_json(profile, device),
        "raw": export_raw(profile, device),
    }


# ---- comparison --------------------------------------------------------------

@dataclasses.dataclass
class Difference:
    artifact: str  # "graph", "categories", "json" or "raw"
    message: str   # where the two sides first differ, for a failure message


@dataclasses.dataclass
class Comparison:
    torch: dict = dataclasses.field(repr=False)  # artifact -> PyTorch's answer
    memtl: dict = dataclasses.field(repr=False)  # artifact -> memtl's answer
    differences: list

    @property
    def equal(self):
        return not self.differences

    def report(self):
        return "\n\n".join("%s differs:\n%s" % (d.artifact, d.message) for d in self.differences)


def _text_difference(ours, theirs):
    """A unified diff (PyTorch as `---`, memtl as `+++`) cut to its first
    lines, headed by the first line number where the two sides part."""
    a, b = theirs.splitlines(), ours.splitlines()
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    diff = list(difflib.unified_diff(a, b, "torch", "memtl", n=_CONTEXT, lineterm=""))
    shown = diff[:_MAX_DIFF_LINES]
    if len(diff) > len(shown):
        shown.append("... (%d more diff lines)" % (len(diff) - len(shown)))
    return "first difference at line %d (torch %d lines, memtl %d lines)\n%s" % (
        first + 1, len(a), len(b), "\n".join(shown))


def _export_difference(artifact, ours, theirs):
    """Exports are compared after parsing; the message names the first
    differing element: a time or size row of `[times, sizes]`, or a row of
    the raw events."""
    if artifact == "json" and len(ours) == 2 and len(theirs) == 2:
        return (_first_list_difference(ours[0], theirs[0], "times")
                or _first_list_difference(ours[1], theirs[1], "sizes") or "differ")
    return _first_list_difference(ours, theirs, "rows") or "differ"


def _first_list_difference(ours, theirs, name):
    if not isinstance(ours, list) or not isinstance(theirs, list):
        return "%s: torch %r, memtl %r" % (name, type(theirs).__name__, type(ours).__name__)
    for i, (x, y) in enumerate(zip(theirs, ours)):
        if x != y:
            return "%s[%d]: torch %r, memtl %r (torch %d entries, memtl %d)" % (
                name, i, x, y, len(theirs), len(ours))
    if len(theirs) != len(ours):
        return "%s: torch %d entries, memtl %d" % (name, len(theirs), len(ours))
    return ""


def compare(prof, device="cpu", workdir=None):
    """Saves `prof` with memtl.save, runs memtl on it and compares each
    artifact with PyTorch's. Returns a Comparison; `differences` is empty
    when memtl and PyTorch agree on all four."""
    expected = torch_artifacts(prof, device)
    with tempfile.TemporaryDirectory(prefix="memtl_oracle_") as tmp:
        d = workdir or tmp
        trace = os.path.join(d, "run.trace.jsonl.gz")
        memtl.save(prof, trace)
        actual = memtl_artifacts(trace, d, device)
    differences = []
    for artifact in ("graph", "categories"):
        if actual[artifact] != expected[artifact]:
            differences.append(Difference(artifact, _text_difference(actual[artifact], expected[artifact])))
    for artifact in ("json", "raw"):
        if actual[artifact] != expected[artifact]:
            differences.append(Difference(artifact, _export_difference(artifact, actual[artifact], expected[artifact])))
    return Comparison(expected, actual, differences)
