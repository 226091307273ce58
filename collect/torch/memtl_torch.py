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

_SCOPES = {
    "FUNCTION": "function",
    "BACKWARD_FUNCTION": "backward_function",
    "TORCHSCRIPT_FUNCTION": "torchscript_function",
    "KERNEL_FUNCTION_DTYPE": "kernel_function_dtype",
    "CUSTOM_CLASS": "custom_class",
    "BUILD_FEATURE": "build_feature",
    "LITE_INTERPRETER": "lite_interpreter",
    "USER_SCOPE": "user_scope",
    "STATIC_RUNTIME_OP": "static_runtime_op",
    "STATIC_RUNTIME_MODEL": "static_runtime_model",
}

_dumps = json.dumps


class RecorderError(ValueError):
    """The profile cannot give a memory timeline (a missing setting)."""


def _enum_name(value):
    name = getattr(value, "name", None)
    if name is None:
        name = str(value).rsplit(".", 1)[-1]
    return name


def _torch_name(value):
    """torch.float32 -> "float32", torch.strided -> "strided"."""
    s = str(value)
    return s[6:] if s.startswith("torch.") else s


def _scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return '{"bool":true}' if value else '{"bool":false}'
    if isinstance(value, int):
        return '{"int":%d}' % value
    if isinstance(value, float):
        if math.isnan(value):
            return '{"float":"nan"}'
        if math.isinf(value):
            return '{"float":"inf"}' if value > 0 else '{"float":"-inf"}'
        return '{"float":%s}' % repr(value)
    if isinstance(value, complex):
        return '{"complex":[%s,%s]}' % (_scalar_num(value.real), _scalar_num(value.imag))
    if isinstance(value, str):
        return '{"str":%s}' % _dumps(value)
    return "null"  # a type the format does not carry: uncaptured


def _scalar_num(x):
    if math.isnan(x) or math.isinf(x):
        return _dumps(str(x))
    return repr(float(x))


def _ints(values):
    return "[" + ",".join(str(int(v)) for v in (values or ())) + "]"


def _opt_int(value):
    return "null" if value is None else str(int(value))


class _Writer:
    def __init__(self, out, devices):
        self.out = out
        self.devices = devices
        self.op_names = {}

    def device(self, dev):
        name = str(dev)
        self.devices.add(name)
        return name

    # ---- tensors -------------------------------------------------------
    def tensor_v2(self, t):
        """A PyTorch >= 2.0 _TensorMetadata (ids present)."""
        return (
            '{"impl":%d,"ptr":%d,"id":%s,"aid":%s,"dev":%s,"dtype":%s,"layout":%s,"sizes":%s,"strides":%s}'
            % (
                int(t.impl_ptr or 0),
                int(t.storage_data_ptr or 0),
                _opt_int(getattr(t, "id", None)),
                _opt_int(getattr(t, "allocation_id", None)),
                _dumps(self.device(t.device)),
                _dumps(_torch_name(t.dtype)),
                _dumps(_torch_name(t.layout)),
                _ints(t.sizes),
                _ints(t.strides),
            )
        )

    def tensor_v1(self, md, sizes, strides):
        """A torch 1.13 _TensorMetadata with shapes from _Inputs. 1.13's ids
        are recycled, not PyTorch 2.x identities: they are not written."""
        return (
            '{"impl":%d,"ptr":%d,"id":null,"aid":null,"dev":%s,"dtype":%s,"layout":%s,"sizes":%s,"strides":%s}'
            % (
                int(md.impl_ptr or 0),
                int(md.storage_data_ptr or 0),
                _dumps(self.device(md.device)),
                _dumps(_torch_name(md.dtype)),
                _dumps(_torch_name(md.layout)),
                _ints(sizes),
                _ints(strides),
            )
        )

    def opt_tensor_v2(self, t):
        return "null" if t is None else self.tensor_v2(t)

    # ---- events --------------------------------------------------------
    def op(self, i, p, e, fields, v2):
        name = e.name
        if "::" in name:
            self.op_names[name] = True
        if v2:
            args = []
            for a in fields.inputs:
                if a is None:
                    args.append("null")
                elif isinstance(a, list):
                    args.append('{"list":[%s]}' % ",".join(self.opt_tensor_v2(x) for x in a))
                elif hasattr(a, "impl_ptr"):
                    args.append(self.tensor_v2(a))
                else:
                    args.append(_scalar(a))
        else:
            inputs = fields.inputs
            mds = inputs.tensor_metadata
            dtypes = inputs.dtypes
            shapes = inputs.shapes
            strides = inputs.strides
            ivalues = inputs.ivalues
            args = []
            for k in range(len(dtypes)):
                md = mds[k] if k < len(mds) else None
                if md is not None:
                    args.append(self.tensor_v1(md, shapes[k] if k < len(shapes) else (),
                                               strides[k] if k < len(strides) else ()))
                elif dtypes[k] == "TensorList":
                    args.append('{"list":[]}')  # 1.13 does not capture the elements
                elif dtypes[k] == "Scalar" and k < len(ivalues):
                    args.append(_scalar(ivalues[k]))
                else:
                    args.append("null")
        self.out.write(
            '{"k":"op","i":%d,"p":%d,"name":%s,"t0":%d,"t1":%d,"tid":%d,"scope":"%s","seq":%d,"args":[%s]}\n'
            % (
                i, p, _dumps(name), e.start_time_ns, e.end_time_ns, int(e.start_tid or 0),
                _SCOPES.get(_enum_name(fields.scope), "function"), int(fields.sequence_number),
                ",".join(args),
            )
        )

    def alloc(self, i, p, e, f, v2):
        aid = getattr(f, "allocation_id", None) if v2 else None
        tid = getattr(f, "id", None) if v2 else None
        self.out.write(
            '{"k":"alloc","i":%d,"p":%d,"t":%d,"tid":%d,"ptr":%d,"bytes":%d,"dev":%s,'
            '"total_allocated":%d,"total_reserved":%d,"id":%s,"aid":%s}\n'
            % (
                i, p, e.start_time_ns, int(e.start_tid or 0), int(f.ptr), int(f.alloc_size),
                _dumps(self.device(f.device)), int(f.total_allocated), int(f.total_reserved),
                _opt_int(tid), _opt_int(aid),
            )
        )

    def py(self, i, p, e, f, v2):
        extra = ""
        if f is not None:
            if v2:
                module = getattr(f, "module", None)
                optimizer = getattr(f, "optimizer", None)
                if module is not None:
                    params = ",".join(
                        '{"name":%s,"t":%s,"grad":%s}'
                        % (_dumps(name), self.opt_tensor_v2(t), self.opt_tensor_v2(g))
                        for name, t, g in module.parameters
                    )
                    extra = ',"module":{"self":%s,"cls":%s,"params":[%s]}' % (
                        _opt_int(getattr(module, "self_ptr", None)), _dumps(str(module.cls_name)), params)
                elif optimizer is not None:
                    params = ",".join(
                        '{"t":%s,"grad":%s,"state":[%s]}'
                        % (self.opt_tensor_v2(t), self.opt_tensor_v2(g),
                           ",".join("[%s,%s]" % (_dumps(n), self.opt_tensor_v2(s)) for n, s in state))
                        for t, g, state in optimizer.parameters
                    )
                    extra = ',"optimizer":{"self":%s,"params":[%s]}' % (
                        _opt_int(getattr(optimizer, "self_ptr", None)), params)
            else:
                module = getattr(f, "module", None)
                opt = getattr(f, "opt", None)
                if module is not None:
                    params = ",".join(
                        '{"name":%s,"t":{"ptr":%d},"grad":null}' % (_dumps(name), int(addr))
                        for name, addr in module.params
                    )
                    extra = ',"module":{"self":null,"cls":%s,"params":[%s]}' % (_dumps(str(module.cls_name)), params)
                elif opt is not None:
                    params = ",".join('{"t":{"ptr":%d},"grad":null,"state":[]}' % int(a) for a in opt.param_addrs)
                    state = ",".join('[%s,{"ptr":%d}]' % (_dumps(n), int(a)) for n, a in opt.opt_state)
                    extra = ',"optimizer":{"self":%s,"params":[%s],"state":[%s]}' % (
                        _opt_int(getattr(opt, "self", None)), params, state)
        self.out.write(
            '{"k":"py","i":%d,"p":%d,"name":%s,"t0":%d,"t1":%d,"tid":%d%s}\n'
            % (i, p, _dumps(e.name), e.start_time_ns, e.end_time_ns, int(e.start_tid or 0), extra)
        )

    def other(self, i, p, e, kind):
        self.out.write(
            '{"k":"other","i":%d,"p":%d,"name":%s,"t0":%d,"t1":%d,"type":%s}\n'
            % (i, p, _dumps(e.name), e.start_time_ns, e.end_time_ns, _dumps(kind.lower()))
        )

    def schemas(self, lookup):
        for name in sorted(self.op_names):
            self.out.write('{"k":"schema","op":%s,"schemas":[%s]}\n'
                           % (_dumps(name), ",".join(_dumps(s) for s in lookup(name))))


def _event_tree(prof):
    profiler = getattr(prof, "profiler", None)
    if profiler is None:
        raise RecorderError("the profiler never ran: call save() after the `with torch.profiler.profile(...)` block")
    results = getattr(profiler, "kineto_results", None)
    if results is None:
        raise RecorderError("the profiler has no results: call save() after the profiling block has exited")
    return results.experimental_event_tree()


def _check_settings(prof):
    for attr, flag in (("profile_memory", "profile_memory=True"), ("record_shapes", "record_shapes=True"),
                       ("with_stack", "with_stack=True")):
        if hasattr(prof, attr) and not getattr(prof, attr):
            raise RecorderError(
                "memtl needs torch.profiler.profile(record_shapes=True, profile_memory=True, with_stack=True); "
                "this profile was recorded without %s" % flag)


def _schema_lookup():
    import torch

    cache = {}

    def lookup(name):
        if name not in cache:
            try:
                cache[name] = [str(s) for s in torch._C._jit_get_schemas_for_operator(name)]
            except RuntimeError:
                cache[name] = []
        return cache[name]

    return lookup


def write_events(roots, out, torch_version="", schema_lookup=None, settings=None):
    """Writes the header and every event of `roots` (PyTorch's event tree) to
    the text stream `out`. Exposed for tests and other producers."""
    devices = set()
    w = _Writer(out, devices)
    roots = list(roots)
    v2 = _is_v2(roots)
    # Devices are known only after the walk; the header names them, so it is
    # written from a first, cheap pass over allocations.
    stack = list(reversed(roots))
    while stack:
        e = stack.pop()
        if _kind(e, v2) == "Allocation":
            devices.add(str(_fields(e, v2).device))
        stack.extend(reversed(e.children))
    header = {"format": FORMAT, "version": VERSION, "producer": PRODUCER, "torch_version": torch_version,
              "ids": v2, "devices": sorted(devices)}
    header.update(settings or {})
    out.write(_dumps(header, separators=(",", ":")) + "\n")
    index = 0
    allocations = 0
    stack = [(e, -1) for e in reversed(roots)]
    while stack:
        e, parent = stack.pop()
        i = index
        index += 1
        kind = _kind(e, v2)
        f = _fields(e, v2)
        if kind == "TorchOp":
            w.op(i, parent, e, f, v2)
        elif kind == "Allocation":
            allocations += 1
            w.alloc(i, parent, e, f, v2)
        elif kind in ("PyCall", "PyCCall"):
            w.py(i, parent, e, f if kind == "PyCall" else None, v2)
        else:
            w.other(i, parent, e, kind)
        for c in reversed(e.children):
            stack.append((c, i))
    if schema_lookup is not None:
        w.schemas(schema_lookup)
    return index, allocations


def _is_v2(roots):
    for e in roots:
        return hasattr(e, "typed")
    return False


def _kind(e, v2):
    tag = e.typed[0] if v2 else e.tag
    return _enum_name(tag)


def _fields(e, v2):
    return e.typed[1] if v2 else e.extra_fields


def save(prof, path):
    """Writes `prof` (a finished torch.profiler.profile) to `path` as a memtl
    trace; gzip when `path` ends in `.gz`. The file appears whole or not at
    all."""
    import torch

    _check_settings(prof)
    roots = _event_tree(prof)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        if path.endswith(".gz"):
            out = gzip.open(tmp, "wt", compresslevel=6, encoding="utf-8")
        else:
            out = open(tmp, "w", encoding="utf-8")
        with out:
            settings = {k: bool(getattr(prof, k)) for k in ("record_shapes", "profile_memory", "with_stack")
                        if hasattr(prof, k)}
            write_events(roots, out, torch.__version__, _schema_lookup(), settings)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _find_memtl():
    env = os.environ.get("MEMTL_BIN")
    if env:
        return env
    found = shutil.which("memtl")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    candidate = os.path.join(here, "..", "..", "build", "cli", "memtl")
    if os.path.exists(candidate):
        return os.path.normpath(candidate)
    raise RuntimeError("memtl binary not found: put it on PATH or set MEMTL_BIN")


def export_memory_timeline(prof, path, device=None):
    """Drop-in for torch.profiler.profile.export_memory_timeline: records the
    trace to a temporary file and runs `memtl export` on it."""
    binary = _find_memtl()
    with tempfile.TemporaryDirectory(prefix="memtl_") as d:
        trace = os.path.join(d, "run.trace.jsonl.gz")
        save(prof, trace)
        cmd = [binary, "export", trace, "-o", path]
        if device is not None:
            cmd += ["--device", str(device)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.strip() or "memtl export failed with status %d" % r.returncode)
