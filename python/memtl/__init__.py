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

import os
import shutil
import subprocess
import tempfile
from typing import TYPE_CHECKING, Optional, Union

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


def _export_format(path: str) -> Optional[str]:
    """The export written for ``path``, chosen by suffix as PyTorch chooses
    (``.html``; ``raw.json.gz``; any other ``.gz``; ``.json``), or None for a
    suffix neither PyTorch nor memtl gives a meaning to."""
    if path.endswith(".html"):
        return "html"
    if path.endswith(".gz"):
        return "raw" if path.endswith("raw.json.gz") else "json.gz"
    if path.endswith(".json"):
        return "json"
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
    for f in dist.files or ():
        if f.name == "memtl" and f.parent.name in ("bin", "Scripts"):
            candidate = os.path.abspath(str(dist.locate_file(f)))
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    return None


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


def export_memory_timeline(prof: torch.profiler.profile, path: PathLike, device: Optional[str] = None) -> None:
    """Writes the memory timeline of ``prof`` to ``path``, as
    ``prof.export_memory_timeline(path, device)`` does, and much faster.

    The format follows the suffix, as in PyTorch: ``.html`` (report with
    plot), ``.raw.json.gz`` (raw events), ``.json.gz`` or ``.json``
    (``[times_us, sizes by category]``). Any other suffix raises ValueError
    before anything is recorded. ``device`` (``"cpu"``, ``"cuda:0"``)
    defaults to the accelerator whose memory peaks highest (``cuda:N``,
    ``hip:N``...), else ``cpu``.

    The profile must have been recorded with ``record_shapes=True,
    profile_memory=True, with_stack=True`` (RecorderError otherwise).
    A failure of the analysis raises ExportError with memtl's message; the
    output file then does not exist (a previous one is left as it was).
    """
    path = os.fspath(path)
    if _export_format(path) is None:
        raise ValueError(
            "%s: unknown output suffix; use .html, .json, .json.gz or .raw.json.gz "
            "(as torch.profiler.profile.export_memory_timeline)" % path
        )
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ExportError("%s: cannot write: the folder %s does not exist" % (path, directory))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ExportError("%s: cannot write: permission denied on the folder %s" % (path, directory))
    program = binary()
    with tempfile.TemporaryDirectory(prefix="memtl_") as d:
        trace = os.path.join(d, "run.trace.jsonl")
        save(prof, trace)
        cmd = [program, "export", trace, "-o", path]
        if device is not None:
            cmd += ["--device", str(device)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            message = r.stderr.strip() or "no message"
            if message.startswith("memtl: "):
                message = message[len("memtl: "):]
            # The trace was this call's temporary file, gone on return: the
            # message names the user's output instead.
            message = message.replace(trace, "the profile recorded for %s" % path)
            raise ExportError("memtl export failed (status %d): %s" % (r.returncode, message))
