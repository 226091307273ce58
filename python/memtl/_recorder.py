"""memtl's PyTorch recorder: writes a finished profile as a memtl trace.

Usage::

    with torch.profiler.profile(record_shapes=True, profile_memory=True,
                                with_stack=True) as prof:
        ...
    memtl.save(prof, "run.trace.jsonl.gz")

The trace format is docs/trace-format.md. The event tree is walked once
(iteratively: trees can be deep); records are written as they are formatted
(the writer: _records.py),
to a temporary file, and follow the header (which states what the walk
learnt) into the output, so the serialized trace is never held in memory
(the files: _output.py).
Works with PyTorch 1.13 (Debian's; no tensor or
allocation ids, tensor lists not captured) and PyTorch >= 2.0 (`typed`
events with ids); both are tested on real profiles (tests/python/).
Depends on nothing but torch.

With PyTorch 1.13 the walk runs in C++ when the optional extension
`_memtl_torch_native` is built (collect/CMakeLists.txt; the build puts it in
build/collect/torch/, a pip install beside this file): it reads the
profiler's records directly instead of through PyTorch's Python bindings,
and writes the same bytes. The
environment variable MEMTL_TORCH_NATIVE names the directory holding it, or
turns it off with 0; native_walk() says whether it is in use.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import TYPE_CHECKING

from ._output import _open_unnamed_or_temporary, _put_in_place, _SpooledTrace, _TraceFile
from ._records import (  # noqa: F401 (_scalar, UNDECODABLE_NAME: read by the tests)
    _KIND_BY_CLASS,
    UNDECODABLE_NAME,
    _kind,
    _opt_int,
    _py_name,
    _scalar,
    _scope,
    _Writer,
)

if TYPE_CHECKING:  # torch is imported when a profile is saved, not before
    import torch

FORMAT = "memtl-trace"
VERSION = 1
PRODUCER = "memtl_torch 0.1"  # the trace format names its producer; kept across renames

# The settings PyTorch's memory profiler requires (torch.profiler.profile
# attribute names; the same names as the constructor's keyword arguments).
REQUIRED_SETTINGS = ("record_shapes", "profile_memory", "with_stack")

# Records joined per write. Each write holds the lines, their join and its
# UTF-8 encoding: 256 lines (~70 KB) keep that well below even small traces
# (4096 held ~1 MB three times, more than a whole one-step trace) and cost
# no time: the writes are still few.
_FLUSH_LINES = 256

_dumps = json.dumps
# json.dumps(str) without the encoder object's per-call overhead (the same
# C function json.dumps uses with its default ensure_ascii=True).
_jstr = json.encoder.encode_basestring_ascii


# The native walk: unset until first needed, then the module or False.
_native = None
# Why the native walk is not in use ("" when it is, or before the first save).
NATIVE_ERROR = ""
_NATIVE_NAME = "_memtl_torch_native"


def native_walk():
    """The native walk's module (collect/torch/native), or None when the
    Python walk is used: MEMTL_TORCH_NATIVE=0, a torch other than 1.13, or
    no built extension that loads (NATIVE_ERROR says why). Loaded once."""
    global _native, NATIVE_ERROR
    if _native is None:
        _native = False
        setting = os.environ.get("MEMTL_TORCH_NATIVE", "")
        if setting.lower() in ("0", "off", "no", "false"):
            NATIVE_ERROR = "turned off by MEMTL_TORCH_NATIVE=%s" % setting
            return None
        try:
            import torch

            if not str(torch.__version__).startswith("1.13"):
                raise ImportError("torch %s: the native walk reads 1.13's records" % torch.__version__)
            if setting and setting.lower() not in ("1", "on", "yes", "true"):
                directories = [setting]
            else:
                here = os.path.dirname(os.path.abspath(__file__))
                # Installed by pip beside this file, or a source checkout's build.
                directories = [here, os.path.normpath(os.path.join(here, "..", "..", "build", "collect", "torch"))]
            _native = _load_extension(directories)
        except Exception as e:  # noqa: BLE001 -- any failure to load means the Python walk
            NATIVE_ERROR = "%s: %s" % (type(e).__name__, e)
    return _native or None


def _loaded_torch_libraries():
    """Real paths of the libtorch_cpu libraries mapped in this process (None
    when /proc/self/maps cannot be read)."""
    try:
        with open("/proc/self/maps") as f:
            return {os.path.realpath(line.split(None, 5)[5].strip())
                    for line in f if "libtorch_cpu" in line and len(line.split(None, 5)) == 6}
    except OSError:
        return None


def _load_extension(directories):
    import importlib.machinery
    import importlib.util

    for directory in directories:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(directory, _NATIVE_NAME + suffix)
            if os.path.exists(path):
                # Built against another torch than the process's (a pip
                # wheel's 1.13, say): loading it would map a second libtorch.
                try:
                    with open(os.path.join(directory, _NATIVE_NAME + ".torch_lib")) as f:
                        built_for = f.read().strip()
                except OSError:
                    built_for = ""
                loaded = _loaded_torch_libraries()
                if built_for and loaded is not None and os.path.realpath(built_for) not in loaded:
                    raise ImportError("%s was built against %s; this process's torch is %s"
                                      % (path, built_for, ", ".join(sorted(loaded)) or "not loaded"))
                spec = importlib.util.spec_from_file_location(_NATIVE_NAME, path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module
    raise ImportError("%s not found in %s (built by CMake with libtorch-dev and pybind11-dev)"
                      % (_NATIVE_NAME, ", ".join(directories)))


class RecorderError(ValueError):
    """The profile cannot give a memory timeline (a missing setting, or the
    profiler never ran)."""


def _is_v2(roots):
    for e in roots:
        return hasattr(e, "typed")
    return False


class _IdsIncomplete(Exception):
    """A PyTorch 2.x allocation without an id (a run whose ids were not
    computed): the walk starts over without ids."""


class _Facts:
    """What the walk learnt for the header and the settings checks."""

    def __init__(self, events, allocations, devices, aten_ops, ops_with_inputs):
        self.events = events
        self.allocations = allocations
        self.devices = devices  # sorted device names of the allocations
        self.aten_ops = aten_ops  # counted only when asked (check_inputs)
        self.ops_with_inputs = ops_with_inputs


def _walk(roots, write, v2, ids, schema_lookup=None, check_inputs=False):
    """Writes the record of every event of `roots`, in pre-order (iteratively:
    trees can be deep), then the schema records, to `write` (a function
    taking a str) in chunks of _FLUSH_LINES lines, and returns the _Facts
    the header needs, learnt on the way: one pass over the tree. With `ids`
    (PyTorch 2.x), raises _IdsIncomplete at the first allocation without an
    id. The loop is written out flat, with locals for everything it reads
    often: it runs once per event."""
    w = _Writer(ids)
    jstr = _jstr
    kind_by_class = _KIND_BY_CLASS
    flush_lines = _FLUSH_LINES
    lines = []
    append = lines.append
    devices = {}  # device -> its JSON string
    op_names = {}
    scope_names = {}  # the value of a RecordScope member -> "function", ...
    index = 0
    allocations = 0
    aten_ops = ops_with_inputs = 0
    stack = []  # (iterator over a children list, the index of their parent)
    push, pop = stack.append, stack.pop
    it, parent = iter(roots), -1
    while True:
        for e in it:
            i = index
            index += 1
            # Both versions bind the fields as `extra_fields`; 2.x's `typed`
            # pairs them with the tag in a new tuple each time (twice the
            # cost), and the tag is needed only for an unknown fields class.
            f = e.extra_fields
            kind = kind_by_class.get(type(f)) or _kind(e.typed[0] if v2 else None, f)
            if kind == "TorchOp":
                name = e.name
                inputs = f.inputs
                if v2:
                    n = len(inputs)
                    args = ",".join(w.args_v2(inputs))
                else:
                    dtypes = inputs.dtypes
                    n = len(dtypes)
                    args = ",".join(w.args_v1(inputs, dtypes)) if n else ""
                if "::" in name:
                    op_names[name] = True
                    if check_inputs:
                        aten_ops += 1
                        if n:
                            ops_with_inputs += 1
                scope = f.scope
                # By the member's value, not the member: hashing a pybind11
                # enum member calls into C++ twice.
                try:
                    value = scope.value
                except AttributeError:
                    value = scope
                scope_name = scope_names.get(value)
                if scope_name is None:
                    scope_name = scope_names[value] = _scope(scope)
                append('{"k":"op","i":%d,"p":%d,"name":%s,"t0":%d,"t1":%d,"tid":%d,"scope":"%s","seq":%d,'
                       '"args":[%s]}\n'
                       % (i, parent, jstr(name), e.start_time_ns, e.end_time_ns, e.start_tid or 0,
                          scope_name, f.sequence_number, args))
            elif kind == "Allocation":
                allocations += 1
                device = f.device
                try:
                    dev = devices.get(device)
                except TypeError:  # an unhashable stand-in
                    device = str(device)
                    dev = devices.get(device)
                if dev is None:
                    dev = devices[device] = jstr(str(device))
                if ids:
                    aid = getattr(f, "allocation_id", None)
                    if aid is None:
                        raise _IdsIncomplete()
                    append('{"k":"alloc","i":%d,"p":%d,"t":%d,"tid":%d,"ptr":%d,"bytes":%d,"dev":%s,'
                           '"total_allocated":%d,"total_reserved":%d,"id":%s,"aid":%d}\n'
                           % (i, parent, e.start_time_ns, e.start_tid or 0, f.ptr, f.alloc_size, dev,
                              f.total_allocated, f.total_reserved, _opt_int(getattr(f, "id", None)), aid))
                else:
                    append('{"k":"alloc","i":%d,"p":%d,"t":%d,"tid":%d,"ptr":%d,"bytes":%d,"dev":%s,'
                           '"total_allocated":%d,"total_reserved":%d,"id":null,"aid":null}\n'
                           % (i, parent, e.start_time_ns, e.start_tid or 0, f.ptr, f.alloc_size, dev,
                              f.total_allocated, f.total_reserved))
            elif kind == "PyCall" or kind == "PyCCall":
                # The line of the caller's code that made the call (the call
                # site's line); a PyCCall carries nothing else the format keeps.
                caller = getattr(f, "caller", None)
                line = caller.line_number if caller is not None else 0
                append('{"k":"py","i":%d,"p":%d,"name":%s,"t0":%d,"t1":%d,"tid":%d%s%s}\n'
                       % (i, parent, jstr(_py_name(e)), e.start_time_ns, e.end_time_ns, e.start_tid or 0,
                          ',"line":%d' % line if 0 < line < 1 << 30 else "",
                          w.py_extra(f, v2) if kind == "PyCall" else ""))
            else:
                append('{"k":"other","i":%d,"p":%d,"name":%s,"t0":%d,"t1":%d,"type":%s}\n'
                       % (i, parent, jstr(e.name), e.start_time_ns, e.end_time_ns, jstr(kind.lower())))
            if len(lines) >= flush_lines:
                write("".join(lines))
                lines.clear()
            children = e.children
            if children:
                push((it, parent))
                it, parent = iter(children), i
                break  # on with the children's iterator
        else:  # `it` is done: back to its parent's siblings
            if not stack:
                break
            it, parent = pop()
    if schema_lookup is not None:
        lines.extend(_schema_records(sorted(op_names), schema_lookup))
    if lines:
        write("".join(lines))
    return _Facts(index, allocations, sorted({str(d) for d in devices}), aten_ops, ops_with_inputs)


def _schema_records(op_names, schema_lookup):
    """The schema record of each name of the sorted `op_names`."""
    return ['{"k":"schema","op":%s,"schemas":[%s]}\n'
            % (_jstr(name), ",".join(_jstr(s) for s in schema_lookup(name))) for name in op_names]


def _walk_native(native, roots, trace, schema_lookup):
    """_walk for PyTorch 1.13 events, in C++ (same records, same bytes);
    None when `roots` are not PyTorch's own event objects (a test's
    stand-ins), which the Python walk then takes."""
    try:
        events, allocations, devices, aten_ops, ops_with_inputs, op_names = native.walk_v1(
            roots, trace.write_bytes)
    except TypeError:
        trace.reset()
        return None
    if schema_lookup is not None and op_names:
        trace.write("".join(_schema_records(op_names, schema_lookup)))
    return _Facts(events, allocations, devices, aten_ops, ops_with_inputs)


def _distributed():
    """The header's rank, world_size and run when torch.distributed is
    initialized in this process (memtl ranks checks that its traces are one
    run's distinct ranks); {} otherwise. The run is what every rank of one
    job shares: torchrun's TORCHELASTIC_RUN_ID, else the rendezvous address
    MASTER_ADDR:MASTER_PORT."""
    try:
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            return {}
        out = {"rank": int(dist.get_rank()), "world_size": int(dist.get_world_size())}
    except Exception:  # a stand-in torch, or one without distributed
        return {}
    run = os.environ.get("TORCHELASTIC_RUN_ID") or (
        "%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
        if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ else "")
    if run:
        out["run"] = run
    return out


def write_events(roots, out, torch_version="", schema_lookup=None, settings=None, header_extra=None):
    """Writes the header and every event of `roots` (PyTorch's event tree) to
    `out`: a text stream, or save's _TraceFile. `settings` holds the profiler
    settings known from the profile object; a required setting it does not
    name is judged from the events (no allocation at all: profile_memory was
    off; no operator with any input: record_shapes was off) and a
    RecorderError is raised before anything is written. Returns (events
    written, allocations). `header_extra` adds fields to the header (save's
    script, time and model). Exposed for tests and other producers.

    The tree is walked once. The header comes first but states what the walk
    learns (the devices, whether ids are complete), so the body goes to a
    temporary file first: for a text stream, an uncompressed one, copied
    after the header."""
    roots = list(roots)
    v2 = _is_v2(roots)
    settings = dict(settings or {})
    trace = out if isinstance(out, _TraceFile) else _SpooledTrace(out)
    try:
        ids = v2
        native = None if v2 else native_walk()
        facts = _walk_native(native, roots, trace, schema_lookup) if native is not None else None
        while facts is None:
            try:
                facts = _walk(roots, trace.write, v2, ids, schema_lookup, "record_shapes" not in settings)
            except _IdsIncomplete:
                ids = False  # a 2.x run whose ids were not computed: none are written
                trace.reset()
        if "profile_memory" not in settings and facts.allocations == 0:
            raise RecorderError("the profile has no allocation events: record with profile_memory=True")
        if "record_shapes" not in settings and facts.aten_ops and facts.ops_with_inputs == 0:
            raise RecorderError("no operator has any recorded input: record with record_shapes=True")
        header = {"format": FORMAT, "version": VERSION, "producer": PRODUCER, "torch_version": torch_version,
                  "ids": ids, "devices": facts.devices}
        header.update(_distributed())
        header.update(settings)
        header.update(header_extra or {})
        trace.finish(_dumps(header, separators=(",", ":")) + "\n")
    finally:
        if trace is not out:
            trace.close()
    return facts.events, facts.allocations


# ---- the profile object ----------------------------------------------------------

def _settings(prof):
    """The profiler settings the profile object states ({} when it states none)."""
    return {k: bool(getattr(prof, k)) for k in REQUIRED_SETTINGS if hasattr(prof, k)}


def _check_settings(settings):
    missing = ["%s=True" % k for k in REQUIRED_SETTINGS if settings.get(k) is False]
    if missing:
        raise RecorderError(
            "this profile was recorded without %s; memtl (like PyTorch's memory profiler) needs "
            "torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True): "
            "record with %s" % (", ".join(missing), ", ".join(missing)))


def _event_tree(prof):
    if hasattr(prof, "profiler"):  # torch.profiler.profile
        profiler = prof.profiler
        if profiler is None:
            raise RecorderError("the profiler never ran: call save() after the "
                                "`with torch.profiler.profile(...)` block")
    else:  # torch.autograd.profiler.profile
        profiler = prof
    results = getattr(profiler, "kineto_results", None)
    if results is None:
        raise RecorderError("the profiler has no results: call save() after the profiling block has exited")
    return results.experimental_event_tree()


def _schema_lookup():
    import torch

    cache = {}

    def lookup(name):
        found = cache.get(name)
        if found is None:
            try:
                found = [str(s) for s in torch._C._jit_get_schemas_for_operator(name)]
            except RuntimeError:
                found = []
            cache[name] = found
        return found

    return lookup


def _torch_field_error(e, torch_version):
    """A RecorderError for an AttributeError raised by one of PyTorch's
    objects during the walk (a torch whose event tree lacks a field the
    recorder reads), or None for any other AttributeError."""
    obj = getattr(e, "obj", None)
    module = type(obj).__module__ or ""
    if obj is None or not module.startswith("torch"):
        return None
    return RecorderError("torch %s: the profiler's %s has no field %r, which memtl reads; "
                         "memtl records profiles of torch 1.13 and 2.x"
                         % (torch_version, type(obj).__name__, getattr(e, "name", None) or str(e)))


def _script():
    """The base name of the script that runs (what a report names), or None
    in an interactive session."""
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv and sys.argv[0] else None)
    if not path or path == "-c":
        return None
    return os.path.basename(path)


def _model_params(model):
    """The header's "model": each parameter of `model` by its name in
    named_parameters(), with its storage's address and device, which the
    reader matches with the profile's parameter records. A `model` that is
    not an nn.Module gives a warning and None (the trace is written without
    names)."""
    import warnings

    import torch

    if not isinstance(model, torch.nn.Module):
        warnings.warn("memtl: model= takes a torch.nn.Module, not %s; the trace is written without "
                      "the model's parameter names" % type(model).__name__, stacklevel=3)
        return None
    params = []
    for name, p in model.named_parameters():
        try:
            storage = p.untyped_storage() if hasattr(p, "untyped_storage") else p.storage()
            ptr = storage.data_ptr()
        except (RuntimeError, NotImplementedError):  # a tensor without storage (meta, fake)
            continue
        if ptr:
            params.append({"name": name, "ptr": ptr, "dev": str(p.device)})
    return params


def _output_target(path):
    """(the file `path` writes, whether it is written in place), by the
    command's rule (export/atomic_file.h): a directory is refused; an
    existing file that is not regular (a pipe, a terminal, a device, a
    socket) is written in place, as a stream; a symbolic link is followed to
    its end, also when that end does not exist yet (it is created, the link
    stays)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        # Nothing there, or a link to nothing yet: realpath follows links
        # whose ends are missing.
        return os.path.realpath(path), False
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "cannot write %s: is a directory" % path)
    if not stat.S_ISREG(st.st_mode):
        return path, True
    return (os.path.realpath(path) if os.path.islink(path) else path), False


def save(prof: torch.profiler.profile, path: str | os.PathLike[str], model=None) -> None:
    """Writes `prof` (a finished torch.profiler.profile, or a
    torch.autograd.profiler.profile) to `path` as a memtl trace; gzip when
    `path` ends in `.gz`. With `model` (the profiled torch.nn.Module), the
    trace names every parameter, its gradient and its optimizer state as
    `model.named_parameters()` does ("layer1.0.conv1.weight grad"); a
    `model` that is not an nn.Module gives a warning and the trace is
    written without those names. The header also names the script that ran
    and the time of the save, which the report shows. The file appears whole or not at all, and nothing
    else is left behind: it is written to an unnamed file in the same
    directory (O_TMPFILE; a named temporary file where the file system has
    none), synced, then linked into place. As with the command's -o, a
    path that is a pipe, a terminal or a device is written in place, and a
    symbolic link is followed to its end, which is created when missing.
    Raises RecorderError when the profile cannot give a memory timeline,
    and OSError naming `path` when it cannot be written."""
    import torch

    import datetime

    path = os.fspath(path)
    settings = _settings(prof)
    _check_settings(settings)
    extra = {"recorded_at": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    script = _script()
    if script is not None:
        extra["script"] = script
    if model is not None:
        params = _model_params(model)
        if params is not None:
            extra["model"] = params
    try:
        roots = _event_tree(prof)
    except AttributeError as e:
        err = _torch_field_error(e, torch.__version__)
        if err is None:
            raise
        raise err from e
    target, stream = _output_target(path)
    base = os.path.basename(target)

    def write(raw, directory):
        # The gzip header names the final file, not the temporary one.
        trace = _TraceFile(raw, directory, base[:-3] if path.endswith(".gz") else None)
        try:
            write_events(roots, trace, torch.__version__, _schema_lookup(), settings, extra)
        except AttributeError as e:
            err = _torch_field_error(e, torch.__version__)
            if err is None:
                raise
            raise err from e
        finally:
            trace.close()

    if stream:
        # A pipe, a terminal, a device: written in place, as the command does.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as e:
            raise type(e)(e.errno, "cannot write %s: %s" % (path, e.strerror)) from None
        try:
            with os.fdopen(fd, "wb", closefd=False) as raw:
                write(raw, None)
        finally:
            os.close(fd)
        return
    directory = os.path.dirname(os.path.abspath(target))
    try:
        fd, tmp = _open_unnamed_or_temporary(directory, base)
    except OSError as e:
        # Name the user's path, not the temporary one.
        raise type(e)(e.errno, "cannot write %s: %s" % (path, e.strerror)) from None
    placed = False
    try:
        with os.fdopen(fd, "wb", closefd=False) as raw:
            write(raw, directory)
        os.fsync(fd)
        _put_in_place(fd, tmp, target, directory, base)
        placed = True
    finally:
        os.close(fd)  # an unnamed file that was not linked vanishes with it
        if tmp is not None and not placed:
            try:
                os.unlink(tmp)
            except OSError:
                pass
