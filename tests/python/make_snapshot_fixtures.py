#!/usr/bin/env python3
"""Writes the CUDA memory snapshot fixtures (fixtures/snapshot/*.pickle.gz).

    python3 tests/python/make_snapshot_fixtures.py [OUT_DIR]

Each is the dict torch.cuda.memory._snapshot() returns, pickled as
torch.cuda.memory._dump_snapshot pickles it (pickle.dump, the default
protocol) and gzip'd, following the layout PyTorch documents in
torch/cuda/memory.py (_snapshot's docstring) and writes in
torch/csrc/cuda/memory_snapshot.cpp: "segments" (device, address,
total_size, ..., blocks with address, size, requested_size, state, frames),
"device_traces" (per device, entries with action, addr, size, stream,
time_us, frames; an oom entry has device_free instead of addr) and
"allocator_settings". Frames are innermost first, Python frames mixed with
C++ ones (stacks="all"). No torch is needed: a small caching-allocator
model hands out addresses, so the runs are deterministic.

  train.pickle.gz        a model built, then two training steps (forward,
                         loss, backward, Adam step, zero_grad) on cuda:0
  truncated.pickle.gz    the same run with the trace's first entries gone
                         (max_entries wrapped): memory from before the trace
  multi_device.pickle.gz a forward on cuda:0 and one on cuda:1
  expandable.pickle.gz   expandable segments (segment_map, segment_unmap)
                         and an out-of-memory entry
"""
import gzip
import os
import pickle
import sys

TORCH = "/usr/lib/python3/dist-packages/torch/"
USER = "/home/user/train.py"
BASE = {0: 0x7F0000000000, 1: 0x7E0000000000}


def py(file, line, name):
    return {"filename": file, "line": line, "name": name}


def cpp(name):
    return {"filename": "??", "line": 0, "name": name}


# Stacks, outermost first (reversed into the snapshot's innermost-first).
def main_at(line):
    return [py(USER, 40, "<module>"), py(USER, line, "main")]


def module(outer, file, line, kind_line=1775):
    return outer + [
        py(TORCH + "nn/modules/module.py", kind_line, "_wrapped_call_impl"),
        py(TORCH + "nn/modules/module.py", 1786, "_call_impl"),
        py(file, line, "forward"),
    ]


def aten(outer, op):
    return outer + [cpp("at::_ops::%s::call(at::Tensor const&)" % op),
                    cpp("at::native::empty_cuda(c10::ArrayRef<long>)")]


def backward(fn):
    return [cpp("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
            cpp("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)"),
            cpp("torch::autograd::generated::%s::apply(std::vector<at::Tensor>&&)" % fn),
            cpp("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)")]


def optim(line, func="step"):
    return main_at(31) + [py(TORCH + "optim/optimizer.py", 485, "wrapper"),
                          py(TORCH + "optim/adam.py", line, func)]


class Allocator:
    """Bump allocation in one segment per device (or mapped pages of an
    expandable one), with the trace entries PyTorch's allocator records."""

    def __init__(self, expandable=False):
        self.t = 1000
        self.traces = {}
        self.live = {}  # (device, addr) -> (size, frames)
        self.next = {}
        self.segments = {}  # device -> total size
        self.expandable = expandable

    def entry(self, dev, action, addr, size, frames, **extra):
        self.t += 7
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": self.t,
             "frames": list(reversed(frames))}
        if action == "oom":
            del e["addr"]
            e["device_free"] = extra["device_free"]
        self.traces.setdefault(dev, []).append(e)

    def segment(self, dev, size, frames):
        base = BASE[dev] + self.segments.get(dev, 0)
        self.entry(dev, "segment_map" if self.expandable else "segment_alloc", base, size, frames)
        self.segments[dev] = self.segments.get(dev, 0) + size
        self.next.setdefault(dev, BASE[dev])

    def alloc(self, dev, size, frames):
        size = (size + 511) // 512 * 512
        if dev not in self.next or self.next[dev] + size > BASE[dev] + self.segments[dev]:
            self.segment(dev, max(2 << 20, size), frames)
        addr = self.next[dev]
        self.next[dev] += size
        self.live[(dev, addr)] = (size, frames)
        self.entry(dev, "alloc", addr, size, frames)
        return addr

    def free(self, dev, addr, frames):
        size, _ = self.live.pop((dev, addr))
        self.entry(dev, "free_requested", addr, size, frames)
        self.entry(dev, "free_completed", addr, size, frames)

    def snapshot(self, drop_first=0):
        segments = []
        for dev, total in sorted(self.segments.items()):
            blocks, at = [], BASE[dev]
            for (d, addr), (size, frames) in sorted(self.live.items()):
                if d != dev:
                    continue
                if addr > at:
                    blocks.append({"address": at, "size": addr - at, "requested_size": 0,
                                   "state": "inactive", "frames": []})
                blocks.append({"address": addr, "size": size, "requested_size": size - 100,
                               "state": "active_allocated", "frames": list(reversed(frames))})
                at = addr + size
            if at < BASE[dev] + total:
                blocks.append({"address": at, "size": BASE[dev] + total - at, "requested_size": 0,
                               "state": "inactive", "frames": []})
            allocated = sum(b["size"] for b in blocks if b["state"] != "inactive")
            segments.append({"device": dev, "address": BASE[dev], "total_size": total,
                             "allocated_size": allocated, "active_size": allocated,
                             "requested_size": allocated, "stream": 0, "segment_type": "large",
                             "segment_pool_id": (0, 0), "is_expandable": self.expandable,
                             "frames": [], "blocks": blocks})
        ndev = max(self.traces) + 1 if self.traces else 1
        traces = [self.traces.get(d, []) for d in range(ndev)]
        if drop_first:
            traces[0] = traces[0][drop_first:]
        return {"segments": segments, "device_traces": traces,
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                       "garbage_collection_threshold": 0.0,
                                       "expandable_segments": self.expandable,
                                       "roundup_power2_divisions": {"1": 0}},
                "external_annotations": []}


def training(a, dev=0, steps=2):
    linear = TORCH + "nn/modules/linear.py"
    params = []
    for shape_line in (106, 109):  # weight, bias of two layers
        for layer in range(2):
            init = main_at(12) + [py(TORCH + "nn/modules/linear.py", shape_line, "__init__")]
            params.append(a.alloc(dev, 64 * 1024 if shape_line == 106 else 1024, init))
    state = []
    grads = []
    for step in range(steps):
        batch = a.alloc(dev, 32 * 1024, main_at(22))
        fwd = main_at(25)
        h1 = a.alloc(dev, 16 * 1024, aten(module(fwd, linear, 125), "addmm"))
        ws = a.alloc(dev, 4096, aten(module(fwd, linear, 125), "addmm"))
        a.free(dev, ws, aten(module(fwd, linear, 125), "addmm"))
        h2 = a.alloc(dev, 16 * 1024, aten(module(fwd, TORCH + "nn/modules/activation.py", 133), "relu"))
        out = a.alloc(dev, 8 * 1024, aten(module(fwd, linear, 125), "addmm"))
        loss = a.alloc(dev, 512, aten(main_at(26), "mse_loss"))
        # backward on autograd's device thread: C++ frames only
        g_out = a.alloc(dev, 8 * 1024, backward("MseLossBackward0"))
        a.free(dev, loss, backward("MseLossBackward0"))
        for p in range(len(params)):
            if len(grads) < len(params):
                grads.append(a.alloc(dev, 64 * 1024 if p < 2 else 1024, backward("AddmmBackward0")))
        g_h = a.alloc(dev, 16 * 1024, backward("ReluBackward0"))
        a.free(dev, out, backward("AddmmBackward0"))
        a.free(dev, g_out, backward("AddmmBackward0"))
        a.free(dev, h2, backward("ReluBackward0"))
        a.free(dev, h1, backward("AddmmBackward0"))
        a.free(dev, g_h, backward("AddmmBackward0"))
        # the optimizer's state on its first step, a temporary in each
        if not state:
            for p in range(len(params)):
                for _ in ("exp_avg", "exp_avg_sq"):
                    state.append(a.alloc(dev, 64 * 1024 if p < 2 else 1024, optim(161, "_init_group")))
        tmp = a.alloc(dev, 64 * 1024, aten(optim(240), "_foreach_sqrt"))
        a.free(dev, tmp, aten(optim(240), "_foreach_sqrt"))
        a.free(dev, batch, main_at(33))
        # zero_grad(set_to_none=True) frees the gradients
        for g in grads:
            a.free(dev, g, main_at(30) + [py(TORCH + "optim/optimizer.py", 940, "zero_grad")])
        grads = []


def write(out, name, snap):
    path = os.path.join(out, name)
    raw = pickle.dumps(snap)
    with open(path, "wb") as f:
        # mtime 0: the same bytes on every run
        f.write(gzip.compress(raw, mtime=0))
    print("wrote", path, len(raw), "bytes of pickle")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "snapshot")
    os.makedirs(out, exist_ok=True)
    a = Allocator()
    training(a)
    write(out, "train.pickle.gz", a.snapshot())
    write(out, "truncated.pickle.gz", a.snapshot(drop_first=30))

    m = Allocator()
    for dev in (0, 1):
        w = m.alloc(dev, 256 * 1024, main_at(12) + [py(TORCH + "nn/modules/linear.py", 106, "__init__")])
        x = m.alloc(dev, 64 * 1024, main_at(22))
        y = m.alloc(dev, 128 * 1024 * (dev + 1),
                    aten(module(main_at(25), TORCH + "nn/modules/linear.py", 125), "mm"))
        m.free(dev, x, main_at(27))
    write(out, "multi_device.pickle.gz", m.snapshot())

    e = Allocator(expandable=True)
    x = e.alloc(0, 3 << 20, main_at(22))
    y = e.alloc(0, 1 << 20, aten(module(main_at(25), TORCH + "nn/modules/linear.py", 125), "mm"))
    e.free(0, x, main_at(27))
    e.entry(0, "segment_unmap", BASE[0], 2 << 20, main_at(28) + [py(TORCH + "cuda/memory.py", 222, "empty_cache")])
    e.segments[0] -= 2 << 20
    e.entry(0, "oom", 0, 80 << 30, main_at(29), device_free=1 << 30)
    e.entry(0, "snapshot", 0, 0, main_at(30))
    snap = e.snapshot()
    # the unmapped head of the segment is no longer part of it
    seg = snap["segments"][0]
    seg["address"] = BASE[0] + (2 << 20)
    seg["blocks"] = [b for b in seg["blocks"] if b["address"] >= BASE[0] + (2 << 20)]
    write(out, "expandable.pickle.gz", snap)


if __name__ == "__main__":
    main()
