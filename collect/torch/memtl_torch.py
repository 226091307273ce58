"""memtl's PyTorch recorder: writes a finished profile as a memtl trace.

Usage::

    with torch.profiler.profile(record_shapes=True, profile_memory=True,
                                with_stack=True) as prof:
        ...
    memtl_torch.save(prof, "run.trace.jsonl.gz")
    memtl_torch.export_memory_timeline(prof, "timeline.html")  # runs memtl

The trace format is docs/trace-format.md. Records are written while the event
tree is walked (iteratively: trees can be deep), so the serialized trace is
never held in memory. Works with PyTorch 1.13 (Debian's; no tensor or
allocation ids, tensor lists not captured) and PyTorch >= 2.0 (`typed`
events with ids); the 2.x path is tested with stand-in objects.
Depends on nothing but torch.
"""

import gzip
import json
import math
import os
import shutil
import subprocess
import tempfile

FORMAT = "memtl-trace"
VERSION = 1
PRODUCER = "memtl_torch 0.1"

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


class RecorderError(ValueError):
    """The profile cannot give a memory timeline (a missing setting, or the
    profiler never ran)."""


# ---- small helpers -------------------------------------------------------------

def _enum_name(value):
    name = getattr(value, "name", None)
    if name is None:
        name = str(value).rsplit(".", 1)[-1]
    return str(name)


def _torch_name(value):
    """torch.float32 -> "float32", torch.strided -> "strided"."""
    s = str(value)
    return s[6:] if s.startswith("torch.") else s


# Enum members (pybind11 or Python enums) are hashable; their `.name` is slow
# on pybind11 enums (microseconds), so names are looked up once per member.
_ENUM_NAMES = {}
_SCOPE_NAMES = {}
_KIND_BY_CLASS = {}


def _scope(scope):
    s = _SCOPE_NAMES.get(scope)
    if s is None:
        # RecordScope.FUNCTION -> "function" (the format lists the lower-case names)
        s = _SCOPE_NAMES[scope] = _enum_name(scope).lower()
    return s


def _kind(tag, fields):
    """The event's _EventType name ("TorchOp", "Allocation", ...). PyTorch binds
    one class per event type, `_ExtraFields_<EventType>`, so the class of the
    fields names the kind without touching the (slow) enum."""
    cls = type(fields)
    k = _KIND_BY_CLASS.get(cls)
    if k is not None:
        return k
    n = cls.__name__
    if n.startswith("_ExtraFields_"):
        k = _KIND_BY_CLASS[cls] = n[len("_ExtraFields_"):]
        return k
    try:
        k = _ENUM_NAMES.get(tag)
        if k is None:
            k = _ENUM_NAMES[tag] = _enum_name(tag)
    except TypeError:  # an unhashable tag
        k = _enum_name(tag)
    return k


def _scalar(value):
    """A python scalar recorded as an op input, as an ARG of the format."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return '{"bool":true}' if value else '{"bool":false}'
    if isinstance(value, int):
        return '{"int":%d}' % value
    if isinstance(value, float):
        return '{"float":%s}' % _float(value)
    if isinstance(value, complex):
        return '{"complex":[%s,%s]}' % (_float(value.real), _float(value.imag))
    if isinstance(value, str):
        return '{"str":%s}' % _jstr(value)
    return "null"  # a type the format does not carry: uncaptured


def _float(x):
    if math.isnan(x):
        return '"nan"'
    if math.isinf(x):
        return '"inf"' if x > 0 else '"-inf"'
    return repr(float(x))


def _ints(values):
    return "[%s]" % ",".join(map(str, values)) if values else "[]"


def _opt_int(value):
    return "null" if value is None else "%d" % value


# ---- the writer ------------------------------------------------------------------

class _Writer:
    def __init__(self, out, ids):
        self.out = out
        self.ids = ids  # write the producer's ids (PyTorch >= 2.0)
        self.buf = []
        self.op_names = {}
        self.meta = {}  # (device, dtype, layout) -> '"dev":..,"dtype":..,"layout":..'

    def flush(self):
        if self.buf:
            self.out.write("".join(self.buf))
            self.buf = []

    def _meta(self, device, dtype, layout):
        key = (device, dtype, layout)
        try:
            s = self.meta.get(key)
        except TypeError:  # unhashable stand-ins
            s, key = None, None
        if s is None:
            s = '"dev":%s,"dtype":%s,"layout":%s' % (
                _jstr(str(device)), _jstr(_torch_name(dtype)), _jstr(_torch_name(layout)))
            if key is not None:
                self.meta[key] = s
        return s

    # ---- tensors -------------------------------------------------------
    def tensor_v2(self, t):
        """A PyTorch >= 2.0 _TensorMetadata (ids present)."""
        if self.ids:
            ids = "%s,\"aid\":%s" % (_opt_int(getattr(t, "id", None)), _opt_int(getattr(t, "allocation_id", None)))
        else:
            ids = 'null,"aid":null'
        return '{"impl":%d,"ptr":%d,"id":%s,%s,"sizes":%s,"strides":%s}' % (
            t.impl_ptr or 0, t.storage_data_ptr or 0, ids,
            self._meta(t.device, t.dtype, t.layout), _ints(t.sizes), _ints(t.strides))

    def opt_tensor_v2(self, t):
        return "null" if t is None else self.tensor_v2(t)

    # ---- events --------------------------------------------------------
    def args_v2(self, inputs):
        args = []
        for a in inputs:
            if a is None:
                args.append("null")
            elif hasattr(a, "impl_ptr"):
                args.append(self.tensor_v2(a))
            elif isinstance(a, (list, tuple)):
                if all(x is None or hasattr(x, "impl_ptr") for x in a):
                    args.append('{"list":[%s]}' % ",".join(self.opt_tensor_v2(x) for x in a))
                else:
                    # A list of scalars (an int[] value, should a PyTorch
                    # version record one): not a form the format carries.
                    args.append("null")
            else:
                args.append(_scalar(a))
        return args

    def args_v1(self, inputs):
        """torch 1.13's _Inputs: parallel lists per argument. 1.13's tensor ids
        are recycled, not PyTorch 2.x identities: they are not written."""
        mds = inputs.tensor_metadata
        dtypes = inputs.dtypes
        n = len(dtypes)
        if len(mds) != n:
            mds = (list(mds) + [None] * n)[:n]
        shapes = strides = ivalues = None
        args = []
        for k in range(n):
            md = mds[k]
            if md is not None:
                if shapes is None:
                    shapes, strides = inputs.shapes, inputs.strides
                args.append('{"impl":%d,"ptr":%d,"id":null,"aid":null,%s,"sizes":%s,"strides":%s}' % (
                    md.impl_ptr or 0, md.storage_data_ptr or 0, self._meta(md.device, md.dtype, md.layout),
                    _ints(shapes[k] if k < len(shapes) else ()), _ints(strides[k] if k < len(strides) else ())))
            else:
                dtype = dtypes[k]
                if dtype == "TensorList":
                    args.append('{"list":[]}')  # 1.13 does not capture the elements
                elif dtype == "Scalar":
                    if ivalues is None:
                        ivalues = inputs.ivalues
                    args.append(_scalar(ivalues[k]) if k < len(ivalues) else "null")
                else:
                    args.append("null")  # None, or a value 1.13 did not capture
        return args

    def op(self, i, p, e, f, v2):
        name = e.name
        if "::" in name:
            self.op_names[name] = True
        args = self.args_v2(f.inputs) if v2 else self.args_v1(f.inputs)
        self.buf.append(
            '{"k":"op","i":%d,"p":%d,"name":%s,"t0":%d,"t1":%d,"tid":%d,"scope":"%s","seq":%d,"args":[%s]}\n'
            % (i, p, _jstr(name), e.start_time_ns, e.end_time_ns, e.start_tid or 0,
               _scope(f.scope), f.sequence_number, ",".join(args)))

    def alloc(self, i, p, e, f, v2):
        if v2 and self.ids:
            ids = '"id":%s,"aid":%s' % (_opt_int(getattr(f, "id", None)), _opt_int(getattr(f, "allocation_id", None)))
        else:
            ids = '"id":null,"aid":null'
        self.buf.append(
            '{"k":"alloc","i":%d,"p":%d,"t":%d,"tid":%d,"ptr":%d,"bytes":%d,"dev":%s,'
            '"total_allocated":%d,"total_reserved":%d,%s}\n'
            % (i, p, e.start_time_ns, e.start_tid or 0, f.ptr, f.alloc_size, _jstr(str(f.device)),
               f.total_allocated, f.total_reserved, ids))

    def module_v2(self, module):
        params = ",".join(
            '{"name":%s,"t":%s,"grad":%s}' % (_jstr(name), self.opt_tensor_v2(t), self.opt_tensor_v2(g))
            for name, t, g in module.parameters)
        return ',"module":{"self":%s,"cls":%s,"params":[%s]}' % (
            _opt_int(getattr(module, "self_ptr", None)), _jstr(str(module.cls_name)), params)

    def optimizer_v2(self, optimizer):
        params = ",".join(
            '{"t":%s,"grad":%s,"state":[%s]}' % (
                self.opt_tensor_v2(t), self.opt_tensor_v2(g),
                ",".join("[%s,%s]" % (_jstr(n), self.opt_tensor_v2(s)) for n, s in state))
            for t, g, state in optimizer.parameters)
        return ',"optimizer":{"self":%s,"params":[%s]}' % (_opt_int(getattr(optimizer, "self_ptr", None)), params)

    @staticmethod
    def module_v1(module):
        # 1.13's _NNModuleInfo: the class name and (name, storage address)
        # per parameter; no module address, no gradients.
        params = ",".join('{"name":%s,"t":{"ptr":%d},"grad":null}' % (_jstr(name), addr)
                          for name, addr in module.params)
        return ',"module":{"self":null,"cls":%s,"params":[%s]}' % (_jstr(str(module.cls_name)), params)

    @staticmethod
    def optimizer_v1(opt):
        # 1.13's _OptInfo: parameter storage addresses and the state flat, not
        # attributed to parameters: it goes to the optimizer-level "state".
        params = ",".join('{"t":{"ptr":%d},"grad":null,"state":[]}' % a for a in opt.param_addrs)
        state = ",".join('[%s,{"ptr":%d}]' % (_jstr(n), a) for n, a in opt.opt_state)
        return ',"optimizer":{"self":%s,"params":[%s],"state":[%s]}' % (
            _opt_int(getattr(opt, "self", None)), params, state)

    def py(self, i, p, e, f, v2):
        extra = ""
        if f is not None:  # a PyCall (PyCCall carries nothing the format keeps)
            module = getattr(f, "module", None)
            if v2:
                if module is not None:
                    extra = self.module_v2(module)
                else:
                    optimizer = getattr(f, "optimizer", None)
                    if optimizer is not None:
                        extra = self.optimizer_v2(optimizer)
            else:
                if module is not None:
                    extra = self.module_v1(module)
                else:
                    opt = getattr(f, "opt", None)
                    if opt is not None:
                        extra = self.optimizer_v1(opt)
        self.buf.append('{"k":"py","i":%d,"p":%d,"name":%s,"t0":%d,"t1":%d,"tid":%d%s}\n'
                        % (i, p, _jstr(e.name), e.start_time_ns, e.end_time_ns, e.start_tid or 0, extra))

    def other(self, i, p, e, kind):
        self.buf.append('{"k":"other","i":%d,"p":%d,"name":%s,"t0":%d,"t1":%d,"type":%s}\n'
                        % (i, p, _jstr(e.name), e.start_time_ns, e.end_time_ns, _jstr(kind.lower())))

    def schemas(self, lookup):
        for name in sorted(self.op_names):
            self.buf.append('{"k":"schema","op":%s,"schemas":[%s]}\n'
                            % (_jstr(name), ",".join(_jstr(s) for s in lookup(name))))


def _is_v2(roots):
    for e in roots:
        return hasattr(e, "typed")
    return False


class _Survey:
    """What a first pass over the tree learns before anything is written: the
    header's device list and whether ids are present, and the evidence for the
    settings checks when the profile object does not say."""

    def __init__(self, roots, v2, check_inputs):
        self.devices = set()
        self.allocations = 0
        self.aten_ops = 0
        self.ops_with_inputs = 0
        self.ids = v2
        stack = list(roots)
        while stack:
            e = stack.pop()
            tag, f = e.typed if v2 else (None, e.extra_fields)
            kind = _kind(tag, f)
            if kind == "Allocation":
                self.allocations += 1
                self.devices.add(str(f.device))
                if v2 and getattr(f, "allocation_id", None) is None:
                    self.ids = False  # a 2.x run whose ids were not computed
            elif check_inputs and kind == "TorchOp" and "::" in e.name:
                self.aten_ops += 1
                inputs = f.inputs
                if v2:
                    if len(inputs):
                        self.ops_with_inputs += 1
                elif len(inputs.dtypes):
                    self.ops_with_inputs += 1
            stack.extend(e.children)


def write_events(roots, out, torch_version="", schema_lookup=None, settings=None):
    """Writes the header and every event of `roots` (PyTorch's event tree) to
    the text stream `out`. `settings` holds the profiler settings known from
    the profile object; a required setting it does not name is judged from the
    events (no allocation at all: profile_memory was off; no operator with any
    input: record_shapes was off) and a RecorderError is raised before anything
    is written. Returns (events written, allocations). Exposed for tests and
    other producers."""
    roots = list(roots)
    v2 = _is_v2(roots)
    settings = dict(settings or {})
    survey = _Survey(roots, v2, "record_shapes" not in settings)
    if "profile_memory" not in settings and survey.allocations == 0:
        raise RecorderError("the profile has no allocation events: record with profile_memory=True")
    if "record_shapes" not in settings and survey.aten_ops and survey.ops_with_inputs == 0:
        raise RecorderError("no operator has any recorded input: record with record_shapes=True")
    header = {"format": FORMAT, "version": VERSION, "producer": PRODUCER, "torch_version": torch_version,
              "ids": survey.ids, "devices": sorted(survey.devices)}
    header.update(settings)
    out.write(_dumps(header, separators=(",", ":")) + "\n")

    w = _Writer(out, survey.ids)
    buf = w.buf
    index = 0
    allocations = 0
    stack = [(e, -1) for e in reversed(roots)]
    pop, push = stack.pop, stack.append
    while stack:
        e, parent = pop()
        i = index
        index += 1
        tag, f = e.typed if v2 else (None, e.extra_fields)
        kind = _kind(tag, f)
        if kind == "TorchOp":
            w.op(i, parent, e, f, v2)
        elif kind == "Allocation":
            allocations += 1
            w.alloc(i, parent, e, f, v2)
        elif kind == "PyCall":
            w.py(i, parent, e, f, v2)
        elif kind == "PyCCall":
            w.py(i, parent, e, None, v2)
        else:
            w.other(i, parent, e, kind)
        children = e.children
        for k in range(len(children) - 1, -1, -1):
            push((children[k], i))
        if len(buf) >= _FLUSH_LINES:
            w.flush()
            buf = w.buf
    if schema_lookup is not None:
        w.schemas(schema_lookup)
    w.flush()
    return index, allocations


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


class _Utf8Sink:
    """A text sink over a binary stream (the gzip or plain temporary file)."""

    def __init__(self, raw):
        self.raw = raw

    def write(self, s):
        self.raw.write(s.encode("utf-8"))


def save(prof, path):
    """Writes `prof` (a finished torch.profiler.profile, or a
    torch.autograd.profiler.profile) to `path` as a memtl trace; gzip when
    `path` ends in `.gz`. The file appears whole or not at all: it is written
    to a temporary file in the same directory and renamed into place."""
    import torch

    path = os.fspath(path)
    settings = _settings(prof)
    _check_settings(settings)
    roots = _event_tree(prof)
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    fd, tmp = tempfile.mkstemp(prefix="." + base + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as raw:
            if path.endswith(".gz"):
                # The gzip header names the final file, not the temporary one.
                with gzip.GzipFile(filename=base[:-3], mode="wb", compresslevel=6, fileobj=raw, mtime=0) as gz:
                    write_events(roots, _Utf8Sink(gz), torch.__version__, _schema_lookup(), settings)
            else:
                write_events(roots, _Utf8Sink(raw), torch.__version__, _schema_lookup(), settings)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---- memtl's drop-in export ------------------------------------------------------------

def _find_memtl():
    env = os.environ.get("MEMTL_BIN")
    if env:
        return env
    found = shutil.which("memtl")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    candidate = os.path.normpath(os.path.join(here, "..", "..", "build", "cli", "memtl"))
    if os.path.exists(candidate):
        return candidate
    raise RuntimeError("memtl binary not found: put it on PATH or set MEMTL_BIN")


def export_memory_timeline(prof, path, device=None):
    """Drop-in for torch.profiler.profile.export_memory_timeline: records the
    trace to a temporary file and runs `memtl export TRACE -o PATH [--device DEV]`."""
    binary = _find_memtl()
    with tempfile.TemporaryDirectory(prefix="memtl_") as d:
        trace = os.path.join(d, "run.trace.jsonl.gz")
        save(prof, trace)
        cmd = [binary, "export", trace, "-o", os.fspath(path)]
        if device is not None:
            cmd += ["--device", str(device)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError("memtl export failed (status %d): %s"
                               % (r.returncode, r.stderr.strip() or "no message"))
