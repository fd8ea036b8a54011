"""Selecting from a trace: a Trace from anything :func:`asynclab.trace.load_trace` takes, and the rows of some kinds or
the GPU's work, on one GPU or all; what the metrics and the breakdowns count from."""
from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from asynclab.trace import WORK_KINDS, Trace, load_trace

__all__ = ["as_trace", "as_kinds", "rows_of", "gpu_work"]


def as_trace(trace: Any) -> Trace:
    """A Trace as it is, anything else loaded with :func:`asynclab.trace.load_trace`.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> as_trace(EXAMPLE_TRACE).devices
        [0]
    """
    return trace if isinstance(trace, Trace) else load_trace(trace)


def as_kinds(k: str | Iterable[str]) -> tuple[str, ...]:
    """One kind or several, as a tuple of kinds.

    Example:
        >>> as_kinds("compute"), as_kinds(["h2d", "d2h"])
        (('compute',), ('h2d', 'd2h'))
    """
    return (k,) if isinstance(k, str) else tuple(k)


def rows_of(tr: Trace, kinds: Iterable[str], device: int | None = None) -> pd.DataFrame:
    """The rows of ``kinds``, on GPU ``device`` only if given (a GPU not in the trace raises ``ValueError``).

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> rows_of(as_trace(EXAMPLE_TRACE), ["launch"])["name"].tolist()
        ['cudaLaunchKernel']
    """
    ev = tr.events
    m = ev["kind"].isin(list(kinds)).to_numpy().copy()
    if device is not None:
        if int(device) not in tr.devices:
            raise ValueError(f"{tr.source}: no GPU {device} in this trace (devices: {tr.devices or 'none'})")
        m &= (ev["device"] == int(device)).fillna(False).to_numpy(dtype=bool)
    return ev[m]


def gpu_work(tr: Trace, device: int | None = None) -> pd.DataFrame:
    """The GPU's work (:data:`asynclab.trace.WORK_KINDS` with a device), on GPU ``device`` only if given.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> gpu_work(as_trace(EXAMPLE_TRACE))["name"].tolist()
        ['k']
    """
    w = rows_of(tr, WORK_KINDS, device)
    return w[w["device"].notna()]
