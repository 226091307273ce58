"""The memtl trace format's rules (docs/trace-format.md), checked on a
writer's output: one set of checks for every writer of the format, the
Python recorder (python/memtl/_records.py, on torch 1.13 and 2.x) and the
native 1.13 walk (collect/torch/native/), and for the traces they wrote
under fixtures/. memtl's own reader is stricter on some limits and laxer
where the format leaves room (unknown fields, a repeated `args`); this
checks what a writer must write, and no more.

check_trace(path) returns the problems found, each "line N: what", at most
`limit` of them; an empty list means the trace follows the format.
"""

import gzip
import json
import re

SCOPES = {"function", "backward_function", "torchscript_function", "kernel_function_dtype", "custom_class",
          "build_feature", "lite_interpreter", "user_scope", "static_runtime_op", "static_runtime_model"}
# PyTorch's dtype names without "torch." (str(dtype)), those the recorders
# can meet.
DTYPES = {"uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32", "complex64",
          "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16", "quint4x2", "quint2x4", "float8_e5m2",
          "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "uint16", "uint32", "uint64", "bits8", "bits16"}
DEVICE = re.compile(r"^[a-z][a-z_]*(:(0|[1-9][0-9]{0,2}))?$")
MAX_ALLOC_BYTES = (1 << 47) - 1
U64 = (1 << 64) - 1


def _reject_constant(name):
    raise ValueError("non-standard JSON constant %s" % name)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


class _Problems(Exception):
    pass


class _Checker:
    def __init__(self, limit):
        self.limit = limit
        self.problems = []
        self.line = 0
        self.events = 0
        self.path = []  # indices of the open ancestors (pre-order)
        self.ids = None  # the header's "ids"
        self.schema_ops = set()

    def fail(self, what):
        self.problems.append("line %d: %s" % (self.line, what))
        if len(self.problems) >= self.limit:
            raise _Problems()

    def field(self, obj, key, ok, what, required=True):
        if key not in obj:
            if required:
                self.fail("missing field %r" % key)
            return False
        if not ok(obj[key]):
            self.fail("%r is not %s: %r" % (key, what, obj[key]))
            return False
        return True

    def header(self, h):
        if not isinstance(h, dict):
            return self.fail("the header is not an object")
        if h.get("format") != "memtl-trace":
            self.fail('the header\'s "format" is not "memtl-trace"')
        self.field(h, "version", lambda v: _is_int(v) and v == 1, "1")
        self.field(h, "producer", lambda v: isinstance(v, str), "a string")
        self.field(h, "ids", lambda v: isinstance(v, bool), "a bool")
        self.ids = h.get("ids")
        self.field(h, "devices", lambda v: isinstance(v, list) and all(
            isinstance(d, str) and DEVICE.match(d) for d in v), "a list of devices")
        for key in ("torch_version", "script", "recorded_at", "run"):
            self.field(h, key, lambda v: isinstance(v, str), "a string", required=False)
        for key in ("record_shapes", "profile_memory", "with_stack"):
            self.field(h, key, lambda v: isinstance(v, bool), "a bool", required=False)
        for key in ("rank", "world_size"):
            self.field(h, key, lambda v: _is_int(v) and v >= 0, "a count", required=False)
        if self.field(h, "model", lambda v: isinstance(v, list), "a list", required=False):
            for p in h["model"]:
                if not (isinstance(p, dict) and isinstance(p.get("name"), str) and _is_int(p.get("ptr"))
                        and isinstance(p.get("dev"), str)):
                    self.fail("a model parameter is not {name, ptr, dev}: %r" % (p,))

    def tensor(self, t, partial_ok=False):
        if not isinstance(t, dict):
            return self.fail("a tensor is not an object: %r" % (t,))
        if "impl" not in t:
            # torch 1.13's python tracer knows a storage address only.
            if not partial_ok or self.ids is not False or set(t) != {"ptr"} or not _is_int(t["ptr"]):
                self.fail("a tensor without \"impl\" that is no partial tensor: %r" % (t,))
            return
        for key in ("impl", "ptr"):
            self.field(t, key, lambda v: _is_int(v) and 0 <= v <= U64, "an address")
        for key in ("id", "aid"):
            self.field(t, key, lambda v: v is None or (_is_int(v) and v >= 0), "an id or null")
        self.field(t, "dev", lambda v: isinstance(v, str) and DEVICE.match(v), "a device")
        self.field(t, "dtype", lambda v: v in DTYPES, "a dtype")
        self.field(t, "layout", lambda v: isinstance(v, str), "a layout")
        self.field(t, "sizes", lambda v: isinstance(v, list) and all(_is_int(x) and x >= 0 for x in v),
                   "a list of sizes")
        self.field(t, "strides", lambda v: isinstance(v, list) and all(_is_int(x) for x in v), "a list of ints")

    def arg(self, a):
        if a is None:
            return
        if not isinstance(a, dict) or not a:
            return self.fail("an argument is not null or an object: %r" % (a,))
        if "impl" in a:
            return self.tensor(a)
        if len(a) != 1:
            return self.fail("an argument has more than one key: %r" % (a,))
        (key, v), = a.items()
        if key == "list":
            if not isinstance(v, list):
                return self.fail("a tensor list is not a list: %r" % (v,))
            for t in v:
                if t is not None:
                    self.tensor(t)
        elif key == "bool":
            if not isinstance(v, bool):
                self.fail("a bool argument is %r" % (v,))
        elif key == "int":
            if not _is_int(v):
                self.fail("an int argument is %r" % (v,))
        elif key == "float":
            if not (isinstance(v, (int, float)) and not isinstance(v, bool)) and v not in ("nan", "inf", "-inf"):
                self.fail("a float argument is %r" % (v,))
        elif key == "complex":
            if not (isinstance(v, list) and len(v) == 2):
                self.fail("a complex argument is not [re, im]: %r" % (v,))
        elif key == "str":
            if not isinstance(v, str):
                self.fail("a string argument is %r" % (v,))
        else:
            self.fail("an argument of unknown form %r" % (key,))

    def params(self, params, module):
        if not isinstance(params, list):
            return self.fail('"params" is not a list')
        for p in params:
            if not isinstance(p, dict) or "t" not in p:
                self.fail("a parameter without \"t\": %r" % (p,))
                continue
            if module and not isinstance(p.get("name"), str):
                self.fail("a module's parameter without a name: %r" % (p,))
            self.tensor(p["t"], partial_ok=True)
            if p.get("grad") is not None:
                self.tensor(p["grad"], partial_ok=True)
            if "state" in p:
                self.states(p["state"])

    def states(self, states):
        if not isinstance(states, list):
            return self.fail('"state" is not a list')
        for s in states:
            if not (isinstance(s, list) and len(s) == 2 and isinstance(s[0], str)):
                self.fail("a state entry is not [name, tensor]: %r" % (s,))
            else:
                self.tensor(s[1], partial_ok=True)

    def py(self, r):
        self.field(r, "line", lambda v: _is_int(v) and 0 <= v < (1 << 30), "a line", required=False)
        if "module" in r and "optimizer" in r:
            self.fail("a python call with both a module and an optimizer")
        m = r.get("module")
        if m is not None:
            self.field(m, "self", lambda v: v is None or _is_int(v), "an address or null")
            self.field(m, "cls", lambda v: isinstance(v, str), "a string")
            self.params(m.get("params"), True)
        o = r.get("optimizer")
        if o is not None:
            self.field(o, "self", lambda v: v is None or _is_int(v), "an address or null")
            self.params(o.get("params"), False)
            if "state" in o:
                self.states(o["state"])

    def record(self, r):
        if not isinstance(r, dict):
            return self.fail("a record is not an object")
        k = r.get("k")
        if k == "schema":
            self.field(r, "op", lambda v: isinstance(v, str) and "::" in v, "an operator name")
            self.field(r, "schemas", lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
                       "a list of strings")
            if r.get("op") in self.schema_ops:
                self.fail("the schemas of %r twice" % r.get("op"))
            self.schema_ops.add(r.get("op"))
            return
        if k not in ("op", "alloc", "py", "other"):
            return self.fail("unknown record kind %r" % (k,))
        if r.get("i") != self.events or not _is_int(r.get("i")):
            self.fail('"i" is %r, expected %d' % (r.get("i"), self.events))
        p = r.get("p")
        if not _is_int(p) or p < -1 or p >= self.events:
            self.fail('"p" is %r: no earlier event' % (p,))
        else:
            # Pre-order: the parent is the current event or one of its ancestors.
            while self.path and self.path[-1] != p:
                self.path.pop()
            if p != -1 and not self.path:
                self.fail("event %d's parent %d is not on the path to it (not pre-order)" % (self.events, p))
        self.path.append(self.events)
        self.events += 1
        time = lambda v: _is_int(v)  # noqa: E731
        tid = lambda v: v is None or (_is_int(v) and 0 <= v <= U64)  # noqa: E731
        if k == "alloc":
            self.field(r, "t", time, "an int")
            self.field(r, "ptr", lambda v: _is_int(v) and 0 <= v <= U64, "an address")
            self.field(r, "bytes", lambda v: _is_int(v) and abs(v) <= MAX_ALLOC_BYTES, "a size")
            self.field(r, "dev", lambda v: isinstance(v, str) and DEVICE.match(v), "a device")
            self.field(r, "tid", tid, "a thread id", required=False)
            for key in ("total_allocated", "total_reserved"):
                self.field(r, key, lambda v: v is None or _is_int(v), "an int", required=False)
            for key in ("id", "aid"):
                self.field(r, key, lambda v: v is None or (_is_int(v) and v >= 0), "an id or null", required=False)
            return
        self.field(r, "name", lambda v: isinstance(v, str), "a string")
        self.field(r, "t0", time, "an int")
        self.field(r, "t1", lambda v: v is None or _is_int(v), "an int", required=False)
        if k == "op":
            self.field(r, "tid", tid, "a thread id")
            self.field(r, "scope", lambda v: v in SCOPES, "a RecordScope")
            self.field(r, "seq", _is_int, "an int")
            if self.field(r, "args", lambda v: isinstance(v, list), "a list"):
                for a in r["args"]:
                    self.arg(a)
        elif k == "py":
            self.field(r, "tid", tid, "a thread id", required=False)
            self.py(r)
        else:
            self.field(r, "type", lambda v: isinstance(v, str), "a string", required=False)


def check_lines(lines, limit=20):
    """The problems of a trace given as its lines (bytes or str)."""
    c = _Checker(limit)
    try:
        for c.line, text in enumerate(lines, 1):
            if isinstance(text, bytes):
                try:
                    text = text.decode("utf-8")
                except UnicodeDecodeError:
                    c.fail("not UTF-8")
                    continue
            if text.endswith("\n"):
                text = text[:-1]
            elif c.line > 1 and text == "":
                continue
            try:
                value = json.loads(text, parse_constant=_reject_constant)
            except ValueError as e:
                c.fail("not JSON: %s" % e)
                continue
            if c.line == 1:
                c.header(value)
            else:
                c.record(value)
        if c.line == 0:
            c.fail("no header")
    except _Problems:
        pass
    return c.problems


def check_trace(path, limit=20):
    """The problems of the trace file at `path` (plain or gzip)."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    with opener(path, "rb") as f:
        return check_lines(f, limit)
