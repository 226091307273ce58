"""memtl: PyTorch memory timelines in which every byte has a meaning.

A drop-in for ``torch.profiler.profile.export_memory_timeline``, backed by
the ``memtl`` command (C++, installed beside this package)::

    import torch, memtl

    with torch.profiler.profile(record_shapes=True, profile_memory=True,
                                with_stack=True) as prof:
        loss = model(x).sum(); loss.backward(); opt.step()
    memtl.export_memory_timeline(prof, "timeline.html")   # or .json, .json.gz, .raw.json.gz
    memtl.save(prof, "run.trace.jsonl.gz")                # the trace, for `memtl` later

Supported: PyTorch 1.13 and 2.x (tested on 1.13.1 and 2.13.0). Importing
``memtl`` does not import torch; ``save`` and ``export_memory_timeline`` do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from typing import TYPE_CHECKING, Optional, Sequence, Union

from ._ranks import analyze
from ._recorder import RecorderError, save
from ._version import __version__

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["__version__", "save", "export_memory_timeline", "analyze", "binary", "RecorderError",
           "ExportError"]

PathLike = Union[str, "os.PathLike[str]"]  # what open() takes


class ExportError(RuntimeError):
    """The ``memtl`` command could not write the timeline; the message is its
    one-line diagnostic."""


_EXPORT_SUFFIXES = {}  # memtl command -> its export suffix table


def _export_format(path: str) -> Optional[str]:
    """The export written for ``path``, chosen by suffix as PyTorch chooses
    (``.html``; ``raw.json.gz``; any other ``.gz``; ``.json``), or None for a
    suffix neither PyTorch nor memtl gives a meaning to. The table is the
    command's own (``memtl --formats``), read once."""
    program = binary()
    table = _EXPORT_SUFFIXES.get(program)
    if table is None:
        r = subprocess.run([program, "--formats"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        if r.returncode != 0:
            raise ExportError("%s --formats failed (status %d): %s"
                              % (program, r.returncode, r.stderr.strip() or "no message"))
        table = _EXPORT_SUFFIXES[program] = [tuple(e) for e in json.loads(r.stdout)["export"]]
    for suffix, name in table:
        if path.endswith(suffix):
            return name
    return None


def _installed_binary() -> Optional[str]:
    """The ``memtl`` command installed by this package's wheel, wherever the
    install scheme put its scripts (a venv, --user, --prefix)."""
    try:
        from importlib import metadata

        dist = metadata.distribution("memtl")
    except Exception:  # noqa: BLE001 -- not installed as a distribution (a source tree)
        return None
    # Only the distribution this very file belongs to (not another install
    # seen from a source tree on PYTHONPATH).
    mine = os.path.realpath(str(dist.locate_file("memtl/__init__.py")))
    if mine != os.path.realpath(__file__):
        return None
    # The binary wheel (scripts/wheel.sh) keeps the command itself in
    # memtl.scripts/, beside the libraries auditwheel copied, and puts a
    # Python script that runs it in bin/: run the command directly.
    found = None
    for f in dist.files or ():
        if f.name == "memtl" and f.parent.name in ("memtl.scripts", "bin", "Scripts"):
            candidate = os.path.abspath(str(dist.locate_file(f)))
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                if f.parent.name == "memtl.scripts":
                    return candidate
                found = candidate
    return found


def binary() -> str:
    """Path of the ``memtl`` command this package runs: ``$MEMTL_BIN`` when
    set, else the one installed with this package, else a source checkout's
    ``build/cli/memtl``, else ``memtl`` on PATH."""
    env = os.environ.get("MEMTL_BIN")
    if env:
        return env
    found = _installed_binary()
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    candidate = os.path.normpath(os.path.join(here, "..", "..", "build", "cli", "memtl"))
    if os.path.isfile(candidate):
        return candidate
    found = shutil.which("memtl")
    if found:
        return found
    raise ExportError("the memtl command was not found: install memtl with pip, or set MEMTL_BIN")


# The trace save() wrote of a profile, kept on the profile object so that
# more exports of it do not walk the profile again (export_memory_timeline).
_SAVED = "_memtl_saved_trace"


def _saved_trace(prof, model) -> str:
    """A trace of ``prof`` (and ``model``) saved once: the walk of the profile
    is the costly part of an export. It lives in a temporary folder that
    goes with the profile object (or at exit); a profile that ran again
    (new results) or another model is saved again."""
    import weakref

    profiler = getattr(prof, "profiler", prof)
    results = getattr(profiler, "kineto_results", None)
    cached = getattr(prof, _SAVED, None)
    if cached is not None:
        c_results, c_model, c_dir, c_trace = cached
        same_model = (c_model is None and model is None) or (
            c_model is not None and model is not None and c_model() is model)
        if c_results is results and same_model and os.path.exists(c_trace):
            return c_trace
    folder = tempfile.TemporaryDirectory(prefix="memtl_")
    trace = os.path.join(folder.name, "run.trace.jsonl")
    save(prof, trace, model=model)
    try:
        model_ref = weakref.ref(model) if model is not None else None
    except TypeError:  # not weakly referable (not an nn.Module: save warned)
        model_ref = None
    try:
        setattr(prof, _SAVED, (results, model_ref, folder, trace))
    except AttributeError:  # a profile object that takes no attributes: no cache
        pass
    return trace


def export_memory_timeline(prof: torch.profiler.profile, path: Union[PathLike, Sequence[PathLike]],
                           device: Optional[str] = None, model=None) -> None:
    """Writes the memory timeline of ``prof`` to ``path``, as
    ``prof.export_memory_timeline(path, device)`` does, and much faster.

    The format follows the suffix, as in PyTorch: ``.html`` (report with
    plot), ``.raw.json.gz`` (raw events), ``.json.gz`` or ``.json``
    (``[times_us, sizes by category]``). Any other suffix raises ValueError
    before anything is recorded. ``device`` (``"cpu"``, ``"cuda:0"``)
    defaults to the accelerator whose memory peaks highest (``cuda:N``,
    ``hip:N``...), else ``cpu``.

    ``path`` may be a list of paths: the profile is walked and analyzed
    once for all of them. Later calls on the same profile (and model) reuse
    the trace the first one saved, so exporting ``.html`` and then ``.json``
    walks the profile once too. ``model`` (the profiled nn.Module) names
    parameters, gradients and optimizer state as ``named_parameters()``
    does (see ``save``).

    The profile must have been recorded with ``record_shapes=True,
    profile_memory=True, with_stack=True`` (RecorderError otherwise).
    A failure of the analysis raises ExportError with memtl's message; the
    output files then do not exist (previous ones are left as they were).
    """
    paths = [os.fspath(p) for p in path] if isinstance(path, (list, tuple)) else [os.fspath(path)]
    if not paths:
        raise ValueError("no output path given")
    for p in paths:
        if _export_format(p) is None:
            raise ValueError(
                "%s: unknown output suffix; use .html, .json, .json.gz or .raw.json.gz "
                "(as torch.profiler.profile.export_memory_timeline)" % p
            )
        directory = os.path.dirname(os.path.abspath(p))
        if not os.path.isdir(directory):
            raise ExportError("%s: cannot write: the folder %s does not exist" % (p, directory))
        if not os.access(directory, os.W_OK | os.X_OK):
            raise ExportError("%s: cannot write: permission denied on the folder %s" % (p, directory))
    program = binary()
    trace = _saved_trace(prof, model)
    cmd = [program, "export", trace]
    for p in paths:
        cmd += ["-o", p]
    if device is not None:
        cmd += ["--device", str(device)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    named = " and ".join(paths)
    if r.returncode != 0:
        message = r.stderr.strip() or "no message"
        if message.startswith("memtl: "):
            message = message[len("memtl: "):]
        # The trace is a temporary file: the message names the user's
        # output instead.
        message = message.replace(trace, "the profile recorded for %s" % named)
        raise ExportError("memtl export failed (status %d): %s" % (r.returncode, message))
    for line in r.stderr.splitlines():
        # A note of the analysis (the model names no parameter of the
        # profile, a truncated trace...) reaches the user as a warning.
        if line.startswith("memtl: note: "):
            import warnings

            warnings.warn(line.replace(trace, "the profile recorded for %s" % named), stacklevel=2)
