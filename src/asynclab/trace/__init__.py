"""Load any torch.profiler Chrome trace (.json / .json.gz, a folder of rank files, a profiler, or a dict) into one Trace."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from asynclab.trace.read.events import (  # noqa: F401 - the event model's vocabulary is part of this module's API
    COMPUTE_KINDS, COPY_KINDS, DEFAULT_CUDA_STREAM, GPU_KINDS, KINDS, SYNC_TID_OFFSET, WORK_KINDS, TraceError,
    TraceWarning, a_type,
)
from asynclab.trace.read.ranks import load_ranks
from asynclab.trace.read.file import gc_paused, load_file  # noqa: F401 - part of this module's API
from asynclab.trace.read.model import EXAMPLE_TRACE, Trace, fmt_us  # noqa: F401 - part of this module's API

__all__ = [
    "Trace",
    "TraceError",
    "TraceWarning",
    "load_trace",
    "load_file",
    "gc_paused",
    "fmt_us",
    "EXAMPLE_TRACE",
    "KINDS",
    "GPU_KINDS",
    "WORK_KINDS",
    "COPY_KINDS",
    "COMPUTE_KINDS",
]


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------
def load_trace(source: Any) -> Trace:
    """Load a torch.profiler Chrome trace, or one trace per rank, into a :class:`Trace`.

    ``source`` is a path (``str``/``Path``, ``.json`` or ``.json.gz``; gzip is detected from the
    content), a folder of rank files or a list of their paths (see :func:`asynclab.trace.read.ranks.load_ranks`:
    one Trace, clocks aligned, a ``rank`` column), a ``torch.profiler.profile`` object (exported to a
    temporary file), a parsed ``dict`` or a bare ``list`` of events. Timestamps are normalised to µs
    from the first event, whatever the PyTorch version wrote (integer µs since the epoch up to 2.3,
    fractional µs relative to ``baseTimeNanoseconds`` from 2.4).

    Bad input raises :class:`TraceError` (a ``ValueError``) with one line naming the file and the
    problem. Recoverable damage only warns (:class:`TraceWarning`): a truncated file loads its
    complete events; malformed events (``ts``/``dur`` not numbers, negative ``dur``) are skipped.
    Nothing in the file is ever executed.

    Example:
        >>> t = load_trace({"traceEvents": [
        ...     {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
        ...      "ts": 100, "dur": 4, "args": {"correlation": 9}},
        ...     {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
        ...      "ts": 110, "dur": 20, "args": {"device": 0, "stream": 7, "correlation": 9}}]})
        >>> t.events[["kind", "start_us", "launch"]].values.tolist()
        [['launch', 0.0, <NA>], ['compute', 10.0, 0]]
    """
    if isinstance(source, Trace):
        return source
    if _is_many(source):
        return load_ranks(source)
    with gc_paused():
        return load_file(source)


def _is_many(source: Any) -> bool:
    """A folder, or a list of paths (a list of dicts is a bare event list)."""
    if isinstance(source, (str, os.PathLike)):
        return Path(source).expanduser().is_dir()
    return (isinstance(source, (list, tuple)) and len(source) > 0
            and all(isinstance(s, (str, os.PathLike)) for s in source))
