"""Load one trace (a .json or .json.gz file, a parsed document, or a profiler) into a Trace: read, build the table, wrap."""
from __future__ import annotations

import gc
import os
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from asynclab.trace.read.events import TraceError, TraceWarning
from asynclab.trace.read.table import build_columns
from asynclab.trace.read.io import RawEvents, from_document, read_file
from asynclab.trace.read.model import EXAMPLE_TRACE, Trace  # noqa: F401 - EXAMPLE_TRACE serves the examples

__all__ = ["load_file", "gc_paused", "from_raw"]


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector: parsing creates millions of objects and no cycles, and
    gen-2 collections over them would otherwise double the time json parsing takes.

    Example:
        >>> with gc_paused():
        ...     gc.isenabled()
        False
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_file(source: Any) -> Trace:
    """One trace file, document or profiler into a :class:`Trace` (no folders: :func:`load_trace` takes those).

    Example:
        >>> load_file(EXAMPLE_TRACE).devices
        [0]
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        name = str(source)
        return from_raw(read_file(path, name), name, {"source": str(path)})
    if isinstance(source, (dict, list)):
        name = "<dict>" if isinstance(source, dict) else "<list>"
        return from_raw(from_document(source, name), name, {"source": name})
    if hasattr(source, "export_chrome_trace"):
        return _load_profiler(source)
    raise TraceError(f"{type(source).__name__}: not a trace (expected a path, a folder of rank files, "
                     f"a dict, or a torch.profiler.profile)")


def _load_profiler(prof: Any) -> Trace:
    fd, tmp = tempfile.mkstemp(prefix="asynclab_trace_", suffix=".json")
    os.close(fd)
    try:
        try:
            prof.export_chrome_trace(tmp)
        except Exception as e:  # the profiler has no data, or was never started
            raise TraceError(f"<profiler>: could not export the trace ({type(e).__name__}: {e})") from None
        t = load_file(tmp)
    finally:
        try:
            os.remove(tmp)
        except OSError:
            pass
    t.source = "<profiler>"
    t.meta["source"] = "<profiler>"
    return t


def from_raw(raw: RawEvents, name: str, meta: dict[str, Any]) -> Trace:
    """A Trace of the events read from one file or document: the table built, damage reported as a warning.

    Example:
        >>> from_raw(from_document(EXAMPLE_TRACE, "<dict>"), "<dict>", {"source": "<dict>"}).devices
        [0]
    """
    for k, v in raw.header.items():
        meta.setdefault(k, v)
    try:
        events = build_columns(raw, name, meta)  # the DataFrame is made when the trace's events are first read
    except TraceError:
        if raw.damage is None:
            raise
        raise TraceError(f"{name}: the trace {raw.damage}, and no complete event precedes the damage") from None
    finally:
        raw.release()
    if raw.damage is not None:
        meta["recovered_events"] = len(events)
        meta["damage"] = raw.damage
        warnings.warn(f"{name}: the trace {raw.damage}; loaded the {len(events):,} complete events before it",
                      TraceWarning, stacklevel=5)
    return Trace(events, meta, meta.get("source", name))
