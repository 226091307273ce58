"""The record writer of memtl's PyTorch recorder (_recorder.py): how each
kind of PyTorch event, argument and python call becomes a line of a memtl
trace (docs/trace-format.md), with the small converters it needs. The walk
of the event tree, which calls it, and save() are in _recorder.py.
"""

from __future__ import annotations

import json
import math
import sys

_dumps = json.dumps
# json.dumps(str) without the encoder object's per-call overhead (the same
# C function json.dumps uses with its default ensure_ascii=True).
_jstr = json.encoder.encode_basestring_ascii

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


# What a python call is named when PyTorch hands over a name that is not
# UTF-8 (its binding then raises UnicodeDecodeError instead of returning it).
UNDECODABLE_NAME = "<python call whose name is not UTF-8>"


def _py_name(e):
    """A python call's name. Under torch 2.13 the python tracer's name of a C
    function is now and then not valid UTF-8 (about one run in eight of a
    small training step), and the binding raises on it; the call is kept,
    under a name that says so, rather than losing the whole trace."""
    try:
        return e.name
    except UnicodeDecodeError:
        return UNDECODABLE_NAME


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
        k = _KIND_BY_CLASS[cls] = sys.intern(n[len("_ExtraFields_"):])
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
    """Formats the nested parts of records: tensors (with a cache of their
    device/dtype/layout strings), PyTorch 2.x arguments, modules and
    optimizers. The walk (_walk) formats the records themselves."""

    def __init__(self, ids):
        self.ids = ids  # write the producer's ids (PyTorch >= 2.0)
        self.meta = {}  # (device, dtype, layout) -> '"dev":..,"dtype":..,"layout":..'
        self.tensor_class = None  # the class of 2.x tensor arguments, once one is seen

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
        """A PyTorch >= 2.0 _TensorMetadata (ids present). Runs once per
        tensor argument: every field is read once, the commonest forms
        inline (sizes and strides are lists of ints: their repr less the
        spaces is _ints' form)."""
        if self.ids:
            tid, aid = t.id, t.allocation_id
            ids = '"id":%s,"aid":%s' % ("null" if tid is None else "%d" % tid,
                                        "null" if aid is None else "%d" % aid)
        else:
            ids = '"id":null,"aid":null'
        device, dtype, layout = t.device, t.dtype, t.layout
        try:
            m = self.meta.get((device, dtype, layout)) or self._meta(device, dtype, layout)
        except TypeError:  # unhashable stand-ins
            m = self._meta(device, dtype, layout)
        return '{"impl":%d,"ptr":%d,%s,%s,"sizes":%s,"strides":%s}' % (
            t.impl_ptr or 0, t.storage_data_ptr or 0, ids, m,
            repr(t.sizes).replace(" ", ""), repr(t.strides).replace(" ", ""))

    def opt_tensor_v2(self, t):
        return "null" if t is None else self.tensor_v2(t)

    # ---- events --------------------------------------------------------
    def args_v2(self, inputs):
        args = []
        add = args.append
        tensor = self.tensor_v2
        tensor_class = self.tensor_class
        for a in inputs:
            cls = type(a)
            if cls is tensor_class:
                add(tensor(a))
            elif a is None:
                add("null")
            elif hasattr(a, "impl_ptr"):
                self.tensor_class = tensor_class = cls  # PyTorch's _TensorMetadata
                add(tensor(a))
            elif isinstance(a, (list, tuple)):
                if all(x is None or hasattr(x, "impl_ptr") for x in a):
                    add('{"list":[%s]}' % ",".join(self.opt_tensor_v2(x) for x in a))
                else:
                    # A list of scalars (an int[] value, should a PyTorch
                    # version record one): not a form the format carries.
                    add("null")
            else:
                add(_scalar(a))
        return args

    def args_v1(self, inputs, dtypes):
        """torch 1.13's _Inputs: parallel lists per argument (`dtypes` is
        inputs.dtypes, already read). 1.13's tensor ids are recycled, not
        PyTorch 2.x identities: they are not written. Runs once per op: the
        usual case (every list as long as `dtypes`) is one zipped loop with
        the commonest scalar forms inline; any other shape takes the general
        loop, which pads what is missing."""
        n = len(dtypes)
        mds = inputs.tensor_metadata
        shapes, strides = inputs.shapes, inputs.strides
        ivalues = inputs.ivalues if "Scalar" in dtypes else dtypes
        args = []
        add = args.append
        meta, metas = self._meta, self.meta
        if len(mds) == n and len(shapes) == n and len(strides) == n and len(ivalues) == n:
            for md, dtype, sizes, strides_k, value in zip(mds, dtypes, shapes, strides, ivalues):
                if md is not None:
                    device, scalar_type, layout = md.device, md.dtype, md.layout
                    m = metas.get((device, scalar_type, layout)) or meta(device, scalar_type, layout)
                    # sizes and strides are lists of ints: their repr less the
                    # spaces is _ints' form.
                    add('{"impl":%d,"ptr":%d,"id":null,"aid":null,%s,"sizes":%s,"strides":%s}' % (
                        md.impl_ptr or 0, md.storage_data_ptr or 0, m,
                        repr(sizes).replace(" ", ""), repr(strides_k).replace(" ", "")))
                elif dtype == "Scalar":
                    # _scalar, with its commonest forms first.
                    scalar_class = type(value)
                    if scalar_class is int:
                        add('{"int":%d}' % value)
                    elif scalar_class is bool:
                        add('{"bool":true}' if value else '{"bool":false}')
                    else:
                        add(_scalar(value))
                elif dtype == "TensorList":
                    add('{"list":[]}')  # 1.13 does not capture the elements
                else:
                    add("null")  # None, or a value 1.13 did not capture
            return args
        if len(mds) != n:
            mds = (list(mds) + [None] * n)[:n]
        if ivalues is dtypes:
            ivalues = ()
        k = 0
        for md in mds:
            if md is not None:
                add('{"impl":%d,"ptr":%d,"id":null,"aid":null,%s,"sizes":%s,"strides":%s}' % (
                    md.impl_ptr or 0, md.storage_data_ptr or 0, meta(md.device, md.dtype, md.layout),
                    _ints(shapes[k]) if k < len(shapes) else "[]",
                    _ints(strides[k]) if k < len(strides) else "[]"))
            else:
                dtype = dtypes[k]
                if dtype == "TensorList":
                    add('{"list":[]}')  # 1.13 does not capture the elements
                elif dtype == "Scalar":
                    add(_scalar(ivalues[k]) if k < len(ivalues) else "null")
                else:
                    add("null")  # None, or a value 1.13 did not capture
            k += 1
        return args

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

    def py_extra(self, f, v2):
        """The module or optimizer part of a PyCall record ("" when none)."""
        module = getattr(f, "module", None)
        if v2:
            if module is not None:
                return self.module_v2(module)
            optimizer = getattr(f, "optimizer", None)
            if optimizer is not None:
                return self.optimizer_v2(optimizer)
        else:
            if module is not None:
                return self.module_v1(module)
            opt = getattr(f, "opt", None)
            if opt is not None:
                return self.optimizer_v1(opt)
        return ""
