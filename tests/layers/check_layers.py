#!/usr/bin/env python3
"""memtl's layering, checked: includes and CMake links point one way.

    python3 tests/layers/check_layers.py [ROOT]          check (exit 1 on any violation)
    python3 tests/layers/check_layers.py --markdown       print the table for the docs

LAYERS below is the one table of what each folder may include. Its rows are
in pipeline order, the bottom first, and a row names only rows above it, so
the dependencies form no cycle. A layer may include its own files and those
of the layers its row names, and of theirs in turn (the closure), except
that a dependency named as private is its .cpp files' alone: its headers
do not include it, so the layers above do not reach it through this one
(core/explain runs the passes again in explain.cpp; nothing above explain
sees them through it).

Checked, each violation one line `file:line: what`:
  - every `#include "..."` of a project file, in every .h/.cpp/.inc/.def
    under the folders of the table, against the table;
  - every project file is in a layer of the table;
  - CMake (core/, passes/, export/, cli/, collect/ CMakeLists.txt): a
    target links only targets of layers its own may depend on; a target
    whose files include another layer's links (directly or through what it
    links) a target of that layer; and a target links no project target
    that none of its files includes from;
  - docs/architecture.md's "Layers" table is the one --markdown prints.
"""
import fnmatch
import os
import re
import sys

# (layer, files (fnmatch patterns from the root; the first row that matches a
# file holds it), depends on, private dependencies, why).
LAYERS = [
    ("core/model", ["core/model/*"], [], [],
     "the bottom: ids, the Trace and its records, the key table, Status; depends on nothing"),
    ("core/categories", ["core/categories/*"], ["core/model"], [],
     "the categories and the dict the passes fill, indexed by the model's slots"),
    ("core/schema", ["core/schema/*"], ["core/model"], [],
     "operator schemas (the built-in table)"),
    ("core/read/common", ["core/read/common/*"], ["core/model"], [],
     "what several readers share: lines, the JSON cursor, format detection, ReadOptions"),
    ("core/read/memtl", ["core/read/memtl/*"], ["core/read/common"], [],
     "memtl's own trace format"),
    ("core/read/kineto", ["core/read/kineto/*"], ["core/read/common"], [],
     "a Kineto trace alone (`kTraceFormatVersion` is the model's)"),
    ("core/read/raw", ["core/read/raw/*"], ["core/read/common"], [],
     "PyTorch's raw memory timeline"),
    ("core/read/snapshot", ["core/read/snapshot/*"], ["core/read/kineto"], [],
     "CUDA memory snapshots: a pickle subset, decoded and never run; the reserved series is the "
     "Kineto reader's type (`ReservedPoint`)"),
    ("core/read/et", ["core/read/et/*"],
     ["core/read/kineto", "core/read/memtl", "core/schema"], [],
     "`--et`: joins an execution trace to the Kineto reader's result (`ReadKinetoJoinedInput` calls "
     "the Kineto reader, not the other way) and builds the joined Trace itself (of the memtl reader "
     "it takes the device rule); the schemas say which overloads the built-in table lacks"),
    ("core/identity", ["core/identity/*"], ["core/schema"], [],
     "tensor identity: the key table"),
    ("core/graph", ["core/graph/*"], ["core/schema"], [],
     "the op tree, the size map and the data-flow graph"),
    ("core/checks", ["core/checks/*"], ["core/graph"], [],
     "the allocation checks, over the op tree"),
    ("core/infer", ["core/infer/*"], ["core/graph", "core/categories"], [],
     "a category per allocation of a trace without tensors (`kPreProfileAddress` is the model's)"),
    ("passes", ["passes/*"], ["core/graph", "core/categories"], [],
     "the semantic passes: read the graph, write categories (`AllTensorVersions` is theirs)"),
    ("core/timeline", ["core/timeline/*"], ["core/graph", "core/categories"], [],
     "the categorized timeline: reads the categories the passes or the inference wrote, "
     "never the passes"),
    ("core/explain", ["core/explain/*"], ["core/timeline", "core/infer"], ["passes"],
     "runs after the passes: `memtl explain` runs them again, traced (`explain.cpp`), so `passes` "
     "is below it; private: no header of explain's names them"),
    ("core/plan (whatif)", ["core/plan/whatif*", "core/plan/help*"], ["core/explain"], [],
     "`memtl whatif` and the report's \"What would help\": the explained timeline replayed"),
    ("export", ["export/*"], ["core/explain", "core/plan (whatif)"], [],
     "writes what the stages made: the timeline, and for the pages the report's, peak's, "
     "summary's, ranks' and whatif's data, whose types are `export.h`'s parameters; not the "
     "passes, nor the pipeline"),
    ("core/pipeline", ["core/pipeline/*"],
     ["core/read/memtl", "core/read/kineto", "core/read/raw", "core/read/snapshot", "core/read/et",
      "core/identity",
      "core/checks", "core/infer", "passes", "core/timeline", "core/explain",
      "core/plan (whatif)"], [],
     "wires every stage up to the report (the pipeline runs the passes and `help.*`); not the "
     "exporters, which the command runs"),
    ("core/plan (fit)", ["core/plan/fit*", "core/plan/runs*"], ["core/pipeline"], [],
     "`memtl fit`: each run's trace analyzed by the pipeline"),
    ("cli (args)", ["cli/app.*"], ["core/model"], [],
     "the flags alone (CLI11), compiled beside the core"),
    ("cli", ["cli/*"], ["cli (args)", "core/pipeline", "core/plan (fit)", "export"], [],
     "the command: runs the pipeline and the outputs"),
    ("collect", ["collect/*"], [], [],
     "the recorders: write memtl traces; include nothing of memtl's"),
]

SCANNED = ["core", "passes", "export", "cli", "collect"]
SOURCE_EXTS = (".h", ".hpp", ".cpp", ".cc", ".inc", ".def")
HEADER_EXTS = (".h", ".hpp", ".inc", ".def")
CMAKE_DIRS = ["core", "passes", "export", "cli", "collect"]
DOC = "docs/architecture.md"
DOC_HEADING = "## Layers"
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')

NAMES = [row[0] for row in LAYERS]
INDEX = {name: i for i, name in enumerate(NAMES)}


def layer_of(path):
    for name, patterns, *_ in LAYERS:
        if any(fnmatch.fnmatchcase(path, p) for p in patterns):
            return name
    return None


def check_table():
    """The table itself: known names, and each row names only rows above it."""
    errors = []
    for i, (name, _, deps, private, _) in enumerate(LAYERS):
        for d in deps + private:
            if d not in INDEX:
                errors.append(f"{__file__}: layer {name} names {d}, which is no layer")
            elif INDEX[d] >= i:
                errors.append(f"{__file__}: layer {name} names {d}, which is not above it")
    return errors


def public_closure():
    """Per layer, itself and what its public dependencies reach (theirs in turn)."""
    reach = {}
    for name, _, deps, _, _ in LAYERS:  # rows above are done first
        r = {name}
        for d in deps:
            r |= reach[d]
        reach[name] = r
    return reach


def allowed_sets():
    """Per layer: what its headers may include, and what its .cpp files may."""
    reach = public_closure()
    headers, sources = {}, {}
    for name, _, _, private, _ in LAYERS:
        headers[name] = reach[name]
        s = set(reach[name])
        for d in private:
            s |= reach[d]
        sources[name] = s
    return headers, sources


def project_files(root):
    out = []
    for top in SCANNED:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
            for f in sorted(files):
                if f.endswith(SOURCE_EXTS):
                    out.append(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"))
    return out


def includes_of(root, path):
    """(line, included project path) per #include "..." of a project file."""
    out = []
    here = os.path.dirname(path)
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            if inc.split("/")[0] in SCANNED + ["tests"]:
                out.append((n, inc))  # from the root, as the build's include path has it
            elif os.path.exists(os.path.join(root, here, inc)):
                out.append((n, os.path.normpath(os.path.join(here, inc)).replace(os.sep, "/")))
            # else not memtl's (absl/..., a system or third-party header)
    return out


def check_includes(root, files, graph):
    headers, sources = allowed_sets()
    errors = []
    for path in files:
        src = layer_of(path)
        if src is None:
            errors.append(f"{path}:1: in no layer of {os.path.relpath(__file__, root)}'s table")
            continue
        allowed = headers[src] if path.endswith(HEADER_EXTS) else sources[src]
        for n, inc in graph[path]:
            dst = layer_of(inc)
            if dst is None:
                errors.append(f"{path}:{n}: {src} includes {inc}, which is in no layer")
            elif dst not in allowed:
                if dst in sources[src]:
                    why = "a private dependency of its .cpp files only, not of its headers"
                elif INDEX[dst] > INDEX[src]:
                    why = "which is above it"
                else:
                    why = "which is not among its dependencies"
                errors.append(f"{path}:{n}: {src} includes {inc} ({dst}), {why}")
    return errors


# ---- CMake ----

CALL = re.compile(r"\b(add_library|add_executable|target_sources|target_link_libraries)\s*\(",
                  re.IGNORECASE)
KEYWORDS = {"STATIC", "SHARED", "MODULE", "OBJECT", "INTERFACE", "PUBLIC", "PRIVATE",
            "EXCLUDE_FROM_ALL", "ALIAS", "IMPORTED", "GLOBAL", "WIN32", "MACOSX_BUNDLE"}


def cmake_calls(root):
    """(file, line, command, target, args) per call that names sources or links."""
    calls = []
    for d in CMAKE_DIRS:
        path = f"{d}/CMakeLists.txt"
        full = os.path.join(root, path)
        if not os.path.exists(full):
            continue
        with open(full, encoding="utf-8") as f:
            text = "".join(re.sub(r"#.*", "", line) for line in f)
        for m in CALL.finditer(text):
            end = text.index(")", m.end())
            args = text[m.end():end].split()
            if not args:
                continue
            line = text.count("\n", 0, m.start()) + 1
            calls.append((d, path, line, m.group(1).lower(), args[0], args[1:]))
    return calls


def check_cmake(root, graph):
    headers, sources = allowed_sets()
    calls = cmake_calls(root)
    target_files, target_at = {}, {}
    for d, path, line, cmd, target, args in calls:
        if cmd in ("add_library", "add_executable", "target_sources"):
            files = target_files.setdefault(target, [])
            target_at.setdefault(target, f"{path}:{line}")
            for a in args:
                if a.upper() in KEYWORDS or "$" in a:
                    continue
                files.append(os.path.normpath(f"{d}/{a}").replace(os.sep, "/"))
    links = {t: [] for t in target_files}
    for d, path, line, cmd, target, args in calls:
        if cmd == "target_link_libraries" and target in target_files:
            links[target] += [(a, f"{path}:{line}") for a in args if a in target_files]

    errors = []
    layers_of = {t: {layer_of(f) for f in fs} - {None} for t, fs in target_files.items()}
    targets_of = {}
    for t, ls in layers_of.items():
        for layer in ls:
            targets_of.setdefault(layer, set()).add(t)

    # A target links only targets of layers its own may depend on.
    for t, linked in links.items():
        may = set().union(*(sources[layer] for layer in layers_of[t])) if layers_of[t] else set()
        for other, at in linked:
            for layer in sorted(layers_of[other] - may, key=INDEX.get):
                errors.append(f"{at}: {t} links {other} ({layer}), which "
                              f"{', '.join(sorted(layers_of[t]))} may not depend on")

    # A target's files: its sources and the headers they include of their
    # own layers; what those include of other layers, it must link.
    def link_closure(t):
        seen, todo = set(), [t]
        while todo:
            for other, _ in links.get(todo.pop(), []):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return seen

    for t, fs in target_files.items():
        own = layers_of[t]
        files, todo = set(), [f for f in fs if f in graph]
        while todo:
            f = todo.pop()
            if f in files:
                continue
            files.add(f)
            todo += [inc for _, inc in graph.get(f, []) if inc in graph and layer_of(inc) in own]
        reach = link_closure(t) | {t}
        used = set()
        for f in sorted(files):
            for n, inc in graph[f]:
                dst = layer_of(inc)
                if dst is None or dst in own:
                    continue
                used.add(dst)
                if not (targets_of.get(dst, set()) & reach):
                    errors.append(f"{f}:{n}: {layer_of(f)} includes {inc} ({dst}), but {t} "
                                  f"links no target of it ({', '.join(sorted(targets_of.get(dst, ['none'])))})")
        for other, at in links[t]:
            if not layers_of[other] & used:
                errors.append(f"{at}: {t} links {other}, but none of its files includes a header "
                              f"of {', '.join(sorted(layers_of[other]))}")
    return errors


# ---- the docs ----

def markdown():
    lines = ["| layer | files | depends on (directly) | why |", "|---|---|---|---|"]
    for name, patterns, deps, private, why in LAYERS:
        on = ", ".join(f"`{d}`" for d in deps) or "nothing"
        if private:
            on += "; private (its .cpp files only): " + ", ".join(f"`{d}`" for d in private)
        files = ", ".join(f"`{p}`" for p in patterns)
        lines.append(f"| `{name}` | {files} | {on} | {why} |")
    return lines


def check_doc(root):
    path = os.path.join(root, DOC)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        text = f.read().split("\n")
    if DOC_HEADING not in text:
        return [f"{DOC}:1: no \"{DOC_HEADING}\" section with the table of {os.path.basename(__file__)}"]
    start = text.index(DOC_HEADING)
    rows = []
    at = None
    for i in range(start + 1, len(text)):
        if text[i].startswith("#"):
            break
        if text[i].startswith("|"):
            at = at or i + 1
            rows.append(text[i])
        elif rows:
            break
    want = markdown()
    if rows != want:
        for k, (got, exp) in enumerate(zip(rows + [""] * len(want), want + [""] * len(rows))):
            if got != exp:
                return [f"{DOC}:{(at or start + 1) + k}: the layers table is not the checker's "
                        f"(python3 tests/layers/check_layers.py --markdown prints it)"]
    return []


def main(argv):
    if "--markdown" in argv:
        print("\n".join(markdown()))
        return 0
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    errors = check_table()
    files = project_files(root)
    graph = {f: includes_of(root, f) for f in files}
    errors += check_includes(root, files, graph)
    errors += check_cmake(root, graph)
    errors += check_doc(root)
    for e in errors:
        print(e)
    if errors:
        print(f"layers: {len(errors)} violations", file=sys.stderr)
        return 1
    n = sum(len(v) for v in graph.values())
    print(f"layers: {len(files)} files, {n} includes of project files, one way")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
